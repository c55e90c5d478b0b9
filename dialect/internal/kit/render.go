package kit

import (
	"errors"

	"github.com/uptrace/bun/schema"
)

// Statements lists the dialect's statements as compiled: name, mode and
// text with its table words substituted (golden files).
func (r *Runner) Statements() []Compiled {
	out := make([]Compiled, len(r.order))
	for i, s := range r.order {
		c := r.stmts[s]
		out[i] = Compiled{Name: c.name, Stmt: s, Text: c.text, PreparedText: c.preparedText, Params: c.params, Names: c.names, Bound: c.bound}
		if c.pieces != nil {
			// The smallest piece: one row.
			p := c.pieces[len(c.pieces)-1]
			out[i].PreparedText, out[i].Params = p.preparedText, p.params
		}
		for name, l := range c.lists {
			if out[i].Lists == nil {
				out[i].Lists = map[string][]string{}
			}
			out[i].Lists[name] = l.names
		}
	}
	return out
}

// Render formats s with args as bun inlines them, for a golden file: the
// statement a reviewer reads, values and all (the dialect's bound ones
// too). args are checked as a run checks them.
func (r *Runner) Render(gen schema.QueryGen, s *Stmt, args Args) (string, error) {
	c, ok := r.stmts[s]
	if !ok {
		return "", errors.New("seqbox: a statement not among the dialect's sets")
	}
	if err := c.check(args); err != nil {
		return "", err
	}
	return gen.FormatQuery(c.text, r.withBound(c, c.inline(args))), nil
}

// Compiled is one statement as the dialect runs it.
type Compiled struct {
	Name string
	Stmt *Stmt
	// Text has its table words substituted and its ?name values.
	Text string
	// PreparedText and Params: a prepared statement as sent to the
	// database, parameter i carrying the value Params[i].
	PreparedText string
	Params       []string
	// Names are the ?name values a call gives, Bound those the dialect
	// binds (Config.Bound); Lists its lists' item values by name.
	Names []string
	Bound []string
	Lists map[string][]string
}
