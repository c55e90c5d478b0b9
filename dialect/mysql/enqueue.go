package mysql

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// insertSQL writes a chunk of messages as two multi-row INSERTs, bodies
// first, into the current generation's table (one statement per
// generation; rotate.go), then incoming rows in the caller's order (their
// AUTO_INCREMENT ids are the FIFO order), with the generation of their
// bodies. A chunk of 1, 10, 100 or 1,000 rows (insertCounts) runs
// prepared, its values sent in the binary protocol: no hex for the server
// to parse, none for the client to write. Any other count runs inlined,
// one statement as before: on MariaDB a statement per piece (kit.PrepareRows,
// as on SQLite) cost more round trips than the parse saved
// (BENCHMARKS.md, "MariaDB's enqueue prepared for exact counts").
var insertSQL = kit.InsertSQL{
	Bodies: kit.PerGeneration(func(g int) *kit.Stmt {
		return kit.PrepareCounts(`INSERT INTO {body_g`+strconv.Itoa(g)+`} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?rows`,
			kit.Rows(`(?id, ?key, ?payload_type, ?payload, ?headers, UTC_TIMESTAMP(6))`), insertCounts...)
	}),
	Incoming: kit.PrepareCounts(`INSERT INTO {incoming} (partition_id, body_id, body_gen) VALUES ?rows`, kit.Rows(`(?pid, ?id, ?gen)`), insertCounts...),
}

// insertCounts are the chunk sizes the enqueue prepares: one message, the
// round batches applications write, and the engine's default chunk
// (EnqueueChunkRows). Each is four statements on every connection (three
// body generations and incoming), 16 in all, against the server's
// max_prepared_stmt_count (16,382 by default, across all connections).
var insertCounts = []int{1, 10, 100, 1000}

// enqueueStmts are the enqueue's statements of this dialect's own.
type enqueueStmts struct {
	// PendingList reads which of the messages ?ids are committed and not
	// yet acked: no outgoing row yet (still incoming), or one past its
	// partition's cursor. A message's body and outgoing row share a
	// generation: one arm per generation.
	PendingList *kit.Stmt
	// InTransaction reads whether the connection is in a transaction
	// (MariaDB).
	InTransaction *kit.Stmt
}

var enqueueSQL = enqueueStmts{
	PendingList: kit.Inline(`SELECT b.id FROM {body_g0} b LEFT JOIN {outgoing_g0} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g1} b LEFT JOIN {outgoing_g1} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)
UNION ALL SELECT b.id FROM {body_g2} b LEFT JOIN {outgoing_g2} o ON o.body_id = b.id
LEFT JOIN {processor} p ON p.partition_id = o.partition_id
WHERE b.id IN (?ids) AND (o.seq IS NULL OR o.seq > p.processed_seq)`),
	InTransaction: kit.Inline(`SELECT @@in_transaction`),
}

// MessageInsertMany writes each chunk as two multi-row INSERTs, always in
// a transaction: the caller's, or one of its own when the connection is
// not in one. The move floors rest on it (floors.go): every transaction
// that allocates an incoming id has written a body row before, so InnoDB
// lists it from before its allocation until it ends.
func (d *mysqlDialect) MessageInsertMany(ctx context.Context, p *dialect.MessageInsertManyParams) error {
	insert := insertSQL.InsertGen(d.Runner, d.gens.Current(d.Runner, rotateSQL.Current))
	return d.inTransaction(ctx, p.Conn, func(ctx context.Context, conn bun.IConn) error {
		q := *p
		q.Conn = conn
		return kit.InsertChunks(ctx, &q, insert)
	})
}

// inTransaction runs fn on conn when conn is a transaction or, on MariaDB,
// a connection in one (@@in_transaction); otherwise in a transaction it
// begins on conn and commits. A connection of a type that cannot begin one
// is used as is, and the floors stop (floors.go): its INSERTs may each be
// a transaction of their own.
func (d *mysqlDialect) inTransaction(ctx context.Context, conn bun.IConn, fn func(ctx context.Context, conn bun.IConn) error) error {
	type beginner interface {
		BeginTx(ctx context.Context, opts *sql.TxOptions) (bun.Tx, error)
	}
	switch c := conn.(type) {
	case bun.Tx, *bun.Tx, *sql.Tx:
		return fn(ctx, conn)
	case *bun.DB:
		return c.RunInTx(ctx, d.TxOptions(), func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
	case *sql.DB:
		return d.DB().RunInTx(ctx, d.TxOptions(), func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
	}
	if d.floors == nil {
		return fn(ctx, conn) // MySQL has no @@in_transaction, and no floors
	}
	var open int
	if err := d.Query(ctx, conn, enqueueSQL.InTransaction, nil, &open); err != nil {
		return err
	}
	if open != 0 {
		return fn(ctx, conn)
	}
	var tx interface {
		bun.IConn
		Commit() error
		Rollback() error
	}
	var err error
	switch c := conn.(type) {
	case beginner:
		tx, err = c.BeginTx(ctx, d.TxOptions())
	case *sql.Conn:
		tx, err = c.BeginTx(ctx, d.TxOptions())
	}
	if err != nil {
		return err
	}
	if tx != nil {
		if err := fn(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	d.floors.stop()
	return fn(ctx, conn)
}

// MessagePendingList returns the ids that are committed but not yet acked.
func (d *mysqlDialect) MessagePendingList(ctx context.Context, p *dialect.MessagePendingListParams) ([]dialect.MessageID, error) {
	return kit.PendingList(ctx, d.Runner, enqueueSQL.PendingList, p)
}
