// Package kit is what the three dialects share below their SQL: the one
// way a statement is declared and run, and the Go flows (chunking,
// locking order, scanning, error mapping) of operations whose steps are
// the same everywhere. It holds no SQL text: every statement is written
// out whole in its dialect's package and handed to a flow as an argument
// (docs/ARCHITECTURE.md, "The SQL layer").
package kit

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/uptrace/bun/schema"
)

// Mode is how a statement runs; it is fixed per statement.
type Mode int

const (
	// Inlined statements are formatted by bun: every value is appended to
	// the text as a literal, escaped by the database's bun dialect.
	Inlined Mode = iota + 1
	// Prepared statements are prepared once per connection and run with
	// their values bound as parameters: the server parses (and PostgreSQL
	// plans, with a generic plan once it pays) the text once. The hot
	// path's fixed-shape statements run this way.
	Prepared
)

func (m Mode) String() string {
	switch m {
	case Inlined:
		return "inlined"
	case Prepared:
		return "prepared"
	default:
		return "invalid"
	}
}

// Stmt is one SQL statement of one dialect, written out whole. Its text
// has two kinds of placeholder and nothing else is ever filled in:
//
//   - {table} words (body, incoming, …): the tables of the dialect's
//     validated prefix, substituted once when the dialect is built;
//   - ?name values, given in Args: bun appends them (Inlined) or they are
//     bound as parameters (Prepared).
//
// A multi-row statement names its repeated piece with a List: ?rows in
// the text, with the item written beside it.
type Stmt struct {
	Text  string
	Mode  Mode
	Lists []List

	// pieces are a prepared row list's sizes, descending (PrepareRows,
	// PrepareCounts); exact, that a run of another count is inlined.
	pieces []int
	exact  bool
}

// List is a piece of a statement repeated once per item, joined by Sep:
// the rows of a VALUES list, the WHEN arms of a CASE. Its Item has the
// statement's placeholders; the items' values are the []Args given for
// the list's ?Name.
type List struct {
	Name string
	Item string
	Sep  string
}

// Inline declares a statement whose values bun inlines.
func Inline(text string, lists ...List) *Stmt {
	return &Stmt{Text: text, Mode: Inlined, Lists: lists}
}

// Prepare declares a statement run prepared, its values bound.
func Prepare(text string) *Stmt {
	return &Stmt{Text: text, Mode: Prepared}
}

// PrepareRows declares a multi-row statement run prepared: its one list
// is prepared for pieces of 1, 2, 4, … 128 items, and a run writes its
// items in such pieces, in their order (pieces.go). Exec only: a read
// would return its rows piece by piece.
func PrepareRows(text string, list List) *Stmt {
	return &Stmt{Text: text, Mode: Prepared, Lists: []List{list}, pieces: pieceSizes()}
}

// PrepareCounts declares a multi-row statement prepared for exactly the
// given numbers of items: a run of one of them is one prepared statement,
// a run of any other count one inlined statement, so that no run takes
// more round trips than an inlined one (pieces.go). Exec only.
func PrepareCounts(text string, list List, counts ...int) *Stmt {
	sizes := slices.Clone(counts)
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	slices.Reverse(sizes)
	return &Stmt{Text: text, Mode: Prepared, Lists: []List{list}, pieces: sizes, exact: true}
}

// Rows is a VALUES list: ?rows, items joined by ", ".
func Rows(item string) List { return List{Name: "rows", Item: item, Sep: ", "} }

// Args are the ?name values of one run of a statement. A List's value is
// a []Item (or a []Args), one per item.
type Args map[string]any

// Item is the values of one item of a List. Args is one; a hot list (the
// rows of an enqueue, of a move) has a type of its own that reads its
// values from the row it wraps, so that no map is built per row.
type Item interface {
	// Value is the item's value for ?name.
	Value(name string) (any, bool)
	schema.NamedArgAppender
}

// Value is a's value for ?name.
func (a Args) Value(name string) (any, bool) {
	v, ok := a[name]
	return v, ok
}

// tableWord matches {name}.
var tableWord = regexp.MustCompile(`\{([a-z_][a-z0-9_]*)\}`)

// scanNamed walks text's ?name values (a ? then [a-z][a-z0-9_]*), calling
// lit with the text between them and named with each name. A statement has
// no other ?: a bare ? would be bound to nothing, or to the wrong value.
// A scan by hand, not a regexp: building a dialect writes out its prepared
// row lists of up to 1,000 rows (pieces.go), and a regexp over those texts
// was most of that time (docs/ARCHITECTURE.md, "The SQL layer").
func scanNamed(text string, lit, named func(string)) {
	start := 0
	for i := 0; i+1 < len(text); i++ {
		if text[i] != '?' || !isNameStart(text[i+1]) {
			continue
		}
		j := i + 2
		for j < len(text) && isNameByte(text[j]) {
			j++
		}
		lit(text[start:i])
		named(text[i+1 : j])
		start, i = j, j-1
	}
	lit(text[start:])
}

func isNameStart(b byte) bool { return 'a' <= b && b <= 'z' }

func isNameByte(b byte) bool { return isNameStart(b) || '0' <= b && b <= '9' || b == '_' }

// replaceNamed is text with each ?name value written as f(name).
func replaceNamed(text string, f func(name string) string) string {
	var b strings.Builder
	b.Grow(len(text))
	scanNamed(text, func(s string) { b.WriteString(s) }, func(name string) { b.WriteString(f(name)) })
	return b.String()
}

// expand substitutes the table words of text, failing on an unknown one
// (a misspelled table must not render as empty text) and on a ? that is
// not a named value.
func expand(text string, tables map[string]string) (string, error) {
	var unknown []string
	out := tableWord.ReplaceAllStringFunc(text, func(m string) string {
		if t, ok := tables[m[1:len(m)-1]]; ok {
			return t
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown table word %s", strings.Join(unknown, ", "))
	}
	named := 0
	scanNamed(out, func(string) {}, func(string) { named++ })
	if all := strings.Count(out, "?"); all != named {
		return "", fmt.Errorf("%d of its %d ? are not ?name values", all-named, all)
	}
	return out, nil
}

// names lists the ?name values of text, in order of appearance, once each.
func names(text string) []string {
	var out []string
	scanNamed(text, func(string) {}, func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	})
	return out
}
