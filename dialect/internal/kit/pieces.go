package kit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/uptrace/bun"
)

// A prepared row list (PrepareRows) is prepared once per piece size,
// powers of two up to 128 items. A call's items are written in pieces,
// the largest that fit first, so any count runs as prepared statements of
// eight shapes: 100 rows are 64 + 32 + 4. A statement of a fixed shape is
// parsed once per connection instead of once per call; bun's inlined
// VALUES list of 100 rows cost SQLite about as much to parse as to insert
// (docs/ARCHITECTURE.md, "The SQL layer"). Each piece is a statement of
// its own: on a database over the network its round trip can cost more
// than the parse it saves. There a list is prepared for exact counts
// (PrepareCounts): a call of one of them is one prepared statement, any
// other count one inlined statement, never more round trips than inlined.

// pieceSizes are the sizes a prepared row list is prepared for,
// descending and ending with 1.
func pieceSizes() []int { return []int{128, 64, 32, 16, 8, 4, 2, 1} }

// splitPieces splits n items into pieces of the given sizes (descending,
// ending with 1), largest first: the index in sizes of each piece.
func splitPieces(sizes []int, n int) []int {
	var out []int
	for i, size := range sizes {
		for n >= size {
			out = append(out, i)
			n -= size
		}
	}
	return out
}

// piece is a prepared row list's statement for one size: its text as
// prepared and, per parameter, the item (or -1: the statement) and name
// whose value it carries.
type piece struct {
	compiled
	size  int
	slots []slot
}

type slot struct {
	item int
	name string
}

// compilePieces prepares c's text for each piece size: the list written
// out that many times, each item's ?name becoming ?name__i.
func (r *Runner) compilePieces(c *compiled, listName string, sizes []int) error {
	l := c.lists[listName]
	for _, name := range append(slices.Clone(c.names), l.names...) {
		if strings.Contains(name, "__") {
			return fmt.Errorf("?%s: a prepared row list's values may not contain __", name)
		}
	}
	c.sizes = sizes
	c.pieces = make([]*piece, len(sizes))
	for k, size := range sizes {
		var rows strings.Builder
		for i := range size {
			if i > 0 {
				rows.WriteString(l.sep)
			}
			suffix := "__" + strconv.Itoa(i)
			rows.WriteString(replaceNamed(l.text, func(name string) string { return "?" + name + suffix }))
		}
		text := strings.Replace(c.text, "?"+listName, rows.String(), 1)
		if strings.Contains(text, "?"+listName) {
			return fmt.Errorf("list ?%s appears more than once", listName)
		}
		p := &piece{compiled: compiled{name: c.name + " (" + strconv.Itoa(size) + " rows)"}, size: size}
		p.preparedText, p.params = parameterize(text, r.cfg.NumberedParams)
		p.slots = make([]slot, len(p.params))
		for i, name := range p.params {
			p.slots[i] = slot{item: -1, name: name}
			if base, idx, ok := strings.Cut(name, "__"); ok {
				n, err := strconv.Atoi(idx)
				if err != nil {
					return fmt.Errorf("?%s: %w", name, err)
				}
				p.slots[i] = slot{item: n, name: base}
			}
		}
		c.pieces[k] = p
	}
	return nil
}

// execPieces runs a prepared row list: each piece prepared, in order. On
// a connection where the statements run inlined (Runner.prepared), the
// whole list is one inlined statement, as an Inline one would be.
func (r *Runner) execPieces(ctx context.Context, conn bun.IConn, c *compiled, args Args) (sql.Result, error) {
	if err := c.check(args); err != nil {
		return nil, err
	}
	listName := c.listName()
	its, _ := items(args[listName])
	var total piecesResult
	for _, k := range c.split(len(its)) {
		p := c.pieces[k]
		stmt, err := r.prepared(ctx, conn, &p.compiled)
		if err != nil {
			return nil, r.Wrap(fmt.Errorf("prepare %s: %w", p.name, err))
		}
		if stmt == nil {
			break // not prepared for this connection: the rest inlined, below
		}
		values, err := r.pieceValues(p, args, its[:p.size])
		if err != nil {
			return nil, fmt.Errorf("seqbox: statement %s: %w", p.name, err)
		}
		res, err := r.bound(stmt, p.preparedText, values).Exec(ctx)
		if err != nil {
			return nil, r.Wrap(err)
		}
		if _, err := total.add(res); err != nil {
			return nil, err
		}
		its = its[p.size:]
	}
	if len(its) == 0 {
		return total, nil
	}
	// Items no prepared piece took (a connection where the statements run
	// inlined, a count PrepareCounts did not prepare): one inlined
	// statement, one round trip.
	rest := maps.Clone(args)
	rest[listName] = its
	res, err := r.inlined(conn, c, rest).Exec(ctx)
	if err != nil {
		return nil, r.Wrap(err)
	}
	return total.add(res)
}

// split is the pieces a run of n items is written in, as indexes into
// c.pieces: the largest that fit first (PrepareRows), or the one of
// exactly n items, or none (PrepareCounts: the run is inlined).
func (c *compiled) split(n int) []int {
	if !c.exact {
		return splitPieces(c.sizes, n)
	}
	if k := slices.Index(c.sizes, n); k >= 0 {
		return []int{k}
	}
	return nil
}

// pieceValues are a piece's parameters for its items.
func (r *Runner) pieceValues(p *piece, args Args, its []Item) ([]any, error) {
	values := make([]any, len(p.slots))
	for i, s := range p.slots {
		if s.item < 0 {
			v, ok := args[s.name]
			if !ok {
				v = r.cfg.Bound[s.name]
			}
			values[i] = v
			continue
		}
		v, ok := its[s.item].Value(s.name)
		if !ok {
			return nil, fmt.Errorf("an item has no ?%s", s.name)
		}
		values[i] = v
	}
	return values, nil
}

// listName is the name of c's one list.
func (c *compiled) listName() string {
	for name := range c.lists {
		return name
	}
	return ""
}

// piecesResult is the rows a prepared row list's pieces changed,
// together.
type piecesResult struct{ affected int64 }

func (p *piecesResult) add(res sql.Result) (sql.Result, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return nil, err
	}
	p.affected += n
	return *p, nil
}

func (p piecesResult) RowsAffected() (int64, error) { return p.affected, nil }

func (piecesResult) LastInsertId() (int64, error) {
	return 0, errors.New("seqbox: a statement run in pieces has no one last insert id")
}
