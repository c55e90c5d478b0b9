package kit

import (
	"testing"

	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

func benchRows() []dialect.MessageRow {
	rows := make([]dialect.MessageRow, 100)
	for i := range rows {
		rows[i] = dialect.MessageRow{PartitionID: int64(i), Key: "customer-42", PayloadType: "order.created", Payload: make([]byte, 256)}
	}
	return rows
}

// BenchmarkRenderRowsPositional is how rows were rendered before kit.
func BenchmarkRenderRowsPositional(b *testing.B) {
	gen := schema.NewQueryGen(pgdialect.New())
	rows := benchRows()
	buf := make([]byte, 0, 1<<16)
	for b.Loop() {
		buf = append(buf[:0], "INSERT INTO b_body (id, msg_key, payload_type, payload, headers, created_at) VALUES "...)
		for i := range rows {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			r := &rows[i]
			buf = gen.AppendQuery(buf, "(?, ?, ?, ?, ?, now())", r.ID[:], KeyArg(r.Key), r.PayloadType, r.Payload, HeadersArg(r.Headers))
		}
	}
}

func BenchmarkRenderRowsKit(b *testing.B) {
	gen := schema.NewQueryGen(pgdialect.New())
	s := &struct{ Bodies, Incoming *Stmt }{Bodies: Inline("INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows",
		Rows("(?id, ?key, ?payload_type, ?payload, ?headers, now())")), Incoming: Inline("INSERT INTO {incoming} VALUES ?rows", Rows("(?pid, ?id)"))}
	r, err := New(Config{Prefix: "b_", Sets: []any{s}, IsRetryable: func(error) bool { return false }, IsDisconnect: func(error) bool { return false }})
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows()
	c := r.stmts[s.Bodies]
	buf := make([]byte, 0, 1<<16)
	for b.Loop() {
		args := Args{"rows": bodyRowsGen(rows, 0)}
		if err := c.check(args); err != nil {
			b.Fatal(err)
		}
		buf = gen.AppendQuery(buf[:0], c.text, c.inline(args))
	}
}

// BenchmarkRenderRowsKitArgs renders the rows as Args, a map each: what
// the typed row items replaced (BENCHMARKS.md, "The SQL layer's third
// design").
func BenchmarkRenderRowsKitArgs(b *testing.B) {
	gen := schema.NewQueryGen(pgdialect.New())
	s := &struct{ Bodies, Incoming *Stmt }{Bodies: Inline("INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows",
		Rows("(?id, ?key, ?payload_type, ?payload, ?headers, now())")), Incoming: Inline("INSERT INTO {incoming} VALUES ?rows", Rows("(?pid, ?id)"))}
	r, err := New(Config{Prefix: "b_", Sets: []any{s}, IsRetryable: func(error) bool { return false }, IsDisconnect: func(error) bool { return false }})
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows()
	c := r.stmts[s.Bodies]
	buf := make([]byte, 0, 1<<16)
	for b.Loop() {
		list := make([]Args, len(rows))
		for i := range rows {
			m := &rows[i]
			list[i] = Args{"id": m.ID[:], "key": KeyArg(m.Key), "payload_type": m.PayloadType, "payload": m.Payload, "headers": HeadersArg(m.Headers)}
		}
		args := Args{"rows": list}
		if err := c.check(args); err != nil {
			b.Fatal(err)
		}
		buf = gen.AppendQuery(buf[:0], c.text, c.inline(args))
	}
}
