package kit

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// Config is what a dialect hands to New: its properties, its statements
// and its database's ways (transactions, errors).
type Config struct {
	DB       *bun.DB
	Prefix   string
	Name     dialect.Name
	Features dialect.Feature
	Limits   dialect.Limits
	Tuning   dialect.Tuning
	// Sets are the dialect's statements: structs (or pointers to them)
	// whose *Stmt fields, nested structs included, are every statement it
	// runs. A nil field is an error from New.
	Sets []any
	// Schema is the dialect's migrations (LoadSchema).
	Schema Schema
	// Bound are values the dialect binds to every statement that names
	// them, whatever the call: a setting chosen once per deployment
	// (PostgreSQL's synchronous_commit for seqbox's own transactions),
	// which no flow then has to carry. A call's Args never name them, and
	// a List's item may not.
	Bound Args
	// NumberedParams: bound parameters are $1, $2, … (PostgreSQL), not ?.
	NumberedParams bool
	// TxOptions are the options of the outbox's own transactions.
	TxOptions *sql.TxOptions
	// BeginWrite, when set, runs first in every outbox transaction so that
	// it holds the write lock before it reads (SQLite).
	BeginWrite *Stmt
	// IsRetryable reports a conflict that may be retried at once;
	// IsDisconnect a connection that dropped or was killed.
	IsRetryable  func(error) bool
	IsDisconnect func(error) bool
}

// Runner runs a dialect's statements and provides its dialect.Base: the
// properties and the transaction discipline, no database operation.
type Runner struct {
	cfg    Config
	tables dialect.Tables
	words  map[string]string
	stmts  map[*Stmt]*compiled
	order  []*Stmt
	boot   []string
	migs   [][]string

	// writer serialises the outbox's own writes on single-writer databases:
	// concurrent writers in one process only make SQLite slower.
	writer sync.Mutex
}

// listItem is a List's item, compiled, and its separator.
type listItem struct {
	compiled
	sep string
}

// compiled is a statement with its table words substituted.
type compiled struct {
	name  string
	text  string
	names []string             // ?name values of text a call gives
	bound []string             // ?name values of text Config.Bound gives
	lists map[string]*listItem // by list name

	// Prepared statements: the text as prepared, where parameter i
	// carries the value params[i], and the statement prepared on the
	// database (nil until Prepare or a first use on the database).
	preparedText string
	params       []string
	mu           sync.Mutex
	stmt         *sql.Stmt

	// pieces: a prepared row list's statement per piece size
	// (PrepareRows, PrepareCounts), largest first, and their sizes; nil
	// for every other statement. exact: only a run of one of the sizes is
	// prepared.
	pieces []*piece
	sizes  []int
	exact  bool
}

// prepareds are the statements c is prepared as: itself, or its pieces.
func (c *compiled) prepareds() []*compiled {
	if c.pieces == nil {
		return []*compiled{c}
	}
	out := make([]*compiled, len(c.pieces))
	for i, p := range c.pieces {
		out[i] = &p.compiled
	}
	return out
}

// New checks every statement of the dialect once, at construction: an
// unknown table word, a bare ?, a list in a prepared statement or a
// missing statement is an error here, never in the middle of the pipeline.
func New(cfg Config) (*Runner, error) {
	tables, err := dialect.NewTables(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: cfg, tables: tables, words: tableWords(tables), stmts: map[*Stmt]*compiled{}}
	named, err := Collect(cfg.Sets...)
	if err != nil {
		return nil, err
	}
	if cfg.BeginWrite != nil {
		named = append(named, NamedStmt{Name: "BeginWrite", Stmt: cfg.BeginWrite})
	}
	for _, n := range named {
		c, err := r.compile(n)
		if err != nil {
			return nil, fmt.Errorf("seqbox: %s statement %s: %w", cfg.Name, n.Name, err)
		}
		r.stmts[n.Stmt] = c
		r.order = append(r.order, n.Stmt)
	}
	if r.boot, r.migs, err = cfg.Schema.render(r.words); err != nil {
		return nil, err
	}
	return r, nil
}

func tableWords(t dialect.Tables) map[string]string {
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
		"generations":    t.Generations,
	}
	// Each generation's tables, where the dialect names them in its
	// statements (MariaDB; docs/ROTATION.md): {body_g0}, {outgoing_g2}.
	for g := range Generations {
		s := "_g" + strconv.Itoa(g)
		words["body"+s], words["outgoing"+s] = t.Body+s, t.Outgoing+s
	}
	return words
}

func (r *Runner) compile(n NamedStmt) (*compiled, error) {
	s := n.Stmt
	if s.Mode != Inlined && s.Mode != Prepared {
		return nil, errors.New("no mode: declare it with Inline or Prepare")
	}
	text, err := expand(s.Text, r.words)
	if err != nil {
		return nil, err
	}
	c := &compiled{name: n.Name, text: text}
	for _, name := range names(text) {
		if _, ok := r.cfg.Bound[name]; ok {
			c.bound = append(c.bound, name)
		} else {
			c.names = append(c.names, name)
		}
	}
	if len(s.Lists) > 0 {
		if s.Mode == Prepared && len(s.Lists) != 1 {
			return nil, errors.New("a prepared statement has a fixed shape: one list at most, prepared in pieces (PrepareRows)")
		}
		c.lists = map[string]*listItem{}
		for _, l := range s.Lists {
			if !slices.Contains(c.names, l.Name) {
				return nil, fmt.Errorf("list ?%s is not in the text", l.Name)
			}
			item, err := expand(l.Item, r.words)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", l.Name, err)
			}
			for _, name := range names(item) {
				if _, ok := r.cfg.Bound[name]; ok {
					return nil, fmt.Errorf("list %s: ?%s is bound by the dialect: write it in the statement, not in an item", l.Name, name)
				}
			}
			c.lists[l.Name] = &listItem{compiled: compiled{name: n.Name + " ?" + l.Name, text: item, names: names(item)}, sep: l.Sep}
		}
	}
	switch {
	case s.Mode == Prepared && len(s.Lists) == 1:
		if len(s.pieces) == 0 || s.pieces[len(s.pieces)-1] < 1 {
			return nil, errors.New("a prepared row list needs its sizes, each at least 1: declare it with PrepareRows or PrepareCounts")
		}
		c.exact = s.exact
		if err := r.compilePieces(c, s.Lists[0].Name, s.pieces); err != nil {
			return nil, err
		}
	case s.Mode == Prepared:
		c.preparedText, c.params = parameterize(text, r.cfg.NumberedParams)
	}
	return c, nil
}

// parameterize rewrites ?name values as the database's parameters: $n
// numbered once per name, or ? repeated per occurrence.
func parameterize(text string, numbered bool) (string, []string) {
	var params []string
	index := map[string]int{}
	out := replaceNamed(text, func(name string) string {
		if !numbered {
			params = append(params, name)
			return "?"
		}
		i, ok := index[name]
		if !ok {
			params = append(params, name)
			i = len(params)
			index[name] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return out, params
}

// NamedStmt is a statement and the name it has in its dialect's sets
// (Type.Field), for errors and golden files.
type NamedStmt struct {
	Name string
	Stmt *Stmt
}

// Collect lists the *Stmt fields of sets, in declaration order, nested
// structs and arrays of statements (one per generation, say) included; a
// nil field is an error unless it is tagged `kit:"optional"` (a statement
// one shape of an operation needs; an array then all nil or none).
func Collect(sets ...any) ([]NamedStmt, error) {
	var out []NamedStmt
	var walk func(prefix string, v reflect.Value) error
	walk = func(prefix string, v reflect.Value) error {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return fmt.Errorf("seqbox: statement set %s is nil", prefix)
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return fmt.Errorf("seqbox: statement set %s is a %s, not a struct", prefix, v.Kind())
		}
		t := v.Type()
		if prefix == "" {
			prefix = t.Name()
		}
		for i := range t.NumField() {
			f, name := v.Field(i), prefix+"."+t.Field(i).Name
			switch {
			case f.Type() == reflect.TypeFor[*Stmt]():
				if f.IsNil() {
					if t.Field(i).Tag.Get("kit") == "optional" {
						continue
					}
					return fmt.Errorf("seqbox: statement %s is missing", name)
				}
				out = append(out, NamedStmt{Name: name, Stmt: f.Interface().(*Stmt)})
			case f.Kind() == reflect.Array && f.Type().Elem() == reflect.TypeFor[*Stmt]():
				if f.IsZero() && t.Field(i).Tag.Get("kit") == "optional" {
					continue
				}
				for j := range f.Len() {
					el := name + "[" + strconv.Itoa(j) + "]"
					if f.Index(j).IsNil() {
						return fmt.Errorf("seqbox: statement %s is missing", el)
					}
					out = append(out, NamedStmt{Name: el, Stmt: f.Index(j).Interface().(*Stmt)})
				}
			case f.Kind() == reflect.Struct || (f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct):
				if err := walk(name, f); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, s := range sets {
		if err := walk("", reflect.ValueOf(s)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
