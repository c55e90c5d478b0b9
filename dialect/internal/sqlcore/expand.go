package sqlcore

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/seqbox/seqbox/dialect"
)

// Expander is the one way SQL text gets its identifiers and fixed
// fragments: every {name} in a statement or migration is replaced, once, at
// start-up, by a table name (from a validated prefix) or a dialect's fixed
// fragment (also SQL text chosen at compile time). Values never pass
// through it: they go through bun's ? placeholders.
type Expander struct {
	words map[string]string
}

// placeholder matches {name}; ${…} or {{…}} never occur in seqbox's SQL.
var placeholder = regexp.MustCompile(`\{([a-z0-9_]+)\}`)

// NewExpander knows the tables of t and the given fragments, which may
// themselves use {name} words (expanded in turn, a few levels deep).
func NewExpander(t dialect.Tables, fragments map[string]string) *Expander {
	words := map[string]string{
		"partitions":     t.Partitions,
		"body":           t.Body,
		"incoming":       t.Incoming,
		"outgoing":       t.Outgoing,
		"processor":      t.Processor,
		"vacuum_counter": t.VacuumCounter,
		"dead_letters":   t.DeadLetters,
		"dedup_keys":     t.DedupKeys,
		"schema_version": t.SchemaVersion,
	}
	for k, v := range fragments {
		words[k] = v
	}
	return &Expander{words: words}
}

// Expand fills every {name}; an unknown name is an error, so a misspelled
// table never renders as empty text.
func (x *Expander) Expand(sql string) (string, error) {
	var missing []string
	for range 4 { // fragments may use fragments
		if !strings.Contains(sql, "{") {
			break
		}
		sql = placeholder.ReplaceAllStringFunc(sql, func(m string) string {
			if w, ok := x.words[m[1:len(m)-1]]; ok {
				return w
			}
			missing = append(missing, m)
			return m
		})
		if len(missing) > 0 {
			return "", fmt.Errorf("seqbox: unknown SQL placeholder %s", strings.Join(missing, ", "))
		}
	}
	return sql, nil
}

// MustExpand is Expand for statements compiled into seqbox: an unknown
// name there is a bug that every test run would hit at start-up.
func (x *Expander) MustExpand(sql string) string {
	s, err := x.Expand(sql)
	if err != nil {
		panic(err)
	}
	return s
}
