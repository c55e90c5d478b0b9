// Enqueue: validating a batch, claiming its dedup keys, writing its rows
// on the caller's connection or in a transaction of the outbox's own, and
// signalling the partitions it wrote to.

package engine

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"time"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/outbox"
)

// Enqueue writes one message on conn (usually the caller's transaction) and
// returns its id, or the first message's id when m is a duplicate (see
// Message.DedupKey and EnqueueResult). See EnqueueBatch.
func (o *Outbox) Enqueue(ctx context.Context, conn bun.IConn, queue string, m outbox.Message) (outbox.MessageID, error) {
	res, err := o.EnqueueResult(ctx, conn, queue, m)
	return res.ID, err
}

// EnqueueResult is Enqueue, also saying whether m was a duplicate.
func (o *Outbox) EnqueueResult(ctx context.Context, conn bun.IConn, queue string, m outbox.Message) (outbox.Enqueued, error) {
	res, err := o.EnqueueBatchResult(ctx, conn, queue, []outbox.Message{m})
	if err != nil {
		return outbox.Enqueued{}, err
	}
	return res[0], nil
}

// EnqueueBatch is EnqueueBatchResult returning only the ids, in order.
func (o *Outbox) EnqueueBatch(ctx context.Context, conn bun.IConn, queue string, msgs []outbox.Message) ([]outbox.MessageID, error) {
	res, err := o.EnqueueBatchResult(ctx, conn, queue, msgs)
	if err != nil {
		return nil, err
	}
	ids := make([]outbox.MessageID, len(res))
	for i := range res {
		ids[i] = res[i].ID
	}
	return ids, nil
}

// EnqueueBatchResult validates every message, then writes them on conn in
// order, in multi-row chunks, and says per message what it did. Nothing is
// written if any message is invalid. Messages with a DedupKey claim it
// first; a duplicate is not written (docs/ARCHITECTURE.md, "Idempotent
// enqueue").
//
// conn is usually the caller's transaction (bun.Tx or *sql.Tx): the messages
// exist iff it commits. Given a *bun.DB or *sql.DB, EnqueueBatchResult runs
// its own transaction (READ COMMITTED on MySQL/MariaDB). A bun.Conn or
// *sql.Conn is used as is, as if it were a transaction the caller owns.
func (o *Outbox) EnqueueBatchResult(ctx context.Context, conn bun.IConn, queue string, msgs []outbox.Message) ([]outbox.Enqueued, error) {
	b, err := o.prepare(queue, msgs, o.extraHeaders(ctx, queue))
	if err != nil {
		return nil, err
	}
	if err := o.checkOpen(); err != nil {
		return nil, err
	}
	if isNilConn(conn) {
		return nil, outbox.ErrNilConn
	}
	var written []dialect.MessageRow
	write := func(ctx context.Context, conn bun.IConn) (err error) {
		written, err = o.write(ctx, conn, b)
		return err
	}
	switch c := conn.(type) {
	case *bun.DB:
		err = o.withWriter(ctx, func(ctx context.Context) error {
			return c.RunInTx(ctx, o.d.TxOptions(), func(ctx context.Context, tx bun.Tx) error { return write(ctx, tx) })
		})
		if err == nil {
			o.markCommitted(written)
		}
	case *sql.DB:
		err = o.withWriter(ctx, func(ctx context.Context) error { return o.inSQLTx(ctx, c, write) })
		if err == nil {
			o.markCommitted(written)
		}
	default:
		err = write(ctx, conn)
		if err == nil {
			o.markPending(ctx, written)
		}
	}
	if err != nil {
		return nil, dialect.Wrap(err, fmt.Sprintf("enqueue to %q", queue))
	}
	o.enqueued.Add(int64(len(written)))
	o.duplicates.Add(int64(len(b.rows) - len(written)))
	return b.results, nil
}

// withWriter runs fn holding the process's single-writer lock (SQLite), and
// releases it however fn ends, a panic included: a lock left taken would
// hang every later write of the process. fn's context is marked as holding
// it, and a chain that holds it already gets ErrWriterHeld: the lock would
// wait for itself.
func (o *Outbox) withWriter(ctx context.Context, fn func(ctx context.Context) error) error {
	if !o.d.Features().Has(dialect.SingleWriter) {
		return fn(ctx)
	}
	if dialect.WriterHeld(ctx, o.d.DB()) {
		return outbox.ErrWriterHeld
	}
	unlock := o.d.LockWriter()
	defer unlock()
	ctx, release := dialect.HoldWriter(ctx, o.d.DB())
	defer release()
	return fn(ctx)
}

// isNilConn reports a connection that would panic on first use: a nil
// interface, a typed nil pointer (*sql.Tx)(nil), or a zero bun.Tx/bun.Conn.
func isNilConn(conn bun.IConn) bool {
	switch c := conn.(type) {
	case nil:
		return true
	case bun.Tx:
		return c.Tx == nil
	case *bun.Tx:
		return c == nil || c.Tx == nil
	case bun.Conn:
		return c.Conn == nil
	case *bun.Conn:
		return c == nil || c.Conn == nil
	}
	v := reflect.ValueOf(conn)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

func (o *Outbox) checkOpen() error {
	select {
	case <-o.stopping:
		return outbox.ErrStopped
	default:
		return nil
	}
}

// batch is a validated enqueue: its rows, and its dedup claims.
type batch struct {
	queue  string
	window time.Duration
	rows   []dialect.MessageRow
	// firstOf[i] is the index of the earlier message of the batch with the
	// same DedupKey as message i, or -1.
	firstOf []int
	// claims are the batch's distinct dedup keys; claimRow[c] is the
	// message that claims claims[c].
	claims   []dialect.DedupClaim
	claimRow []int
	// results is set by write.
	results []outbox.Enqueued
}

// prepare validates the whole batch and builds the rows, before any write.
func (o *Outbox) prepare(queue string, msgs []outbox.Message, extra map[string]string) (*batch, error) {
	if err := outbox.ValidateQueueName(queue); err != nil {
		return nil, err
	}
	q := o.queues[queue]
	if q == nil {
		return nil, &outbox.QueueError{Queue: queue}
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w for queue %q", outbox.ErrEmptyBatch, queue)
	}
	b := &batch{queue: queue, window: q.dedupWindow, rows: make([]dialect.MessageRow, len(msgs)), firstOf: make([]int, len(msgs))}
	var seen map[string]int
	for i := range msgs {
		m := &msgs[i]
		fail := func(err error) *outbox.MessageError {
			return &outbox.MessageError{Index: i, Queue: queue, Partition: m.Partition, PayloadType: m.PayloadType, Err: err}
		}
		if err := outbox.ValidatePayloadType(m.PayloadType); err != nil {
			return nil, fail(err)
		}
		part := m.Partition
		if m.Key != "" {
			if m.Partition != 0 {
				return nil, fail(outbox.ErrKeyAndPartition)
			}
			part = outbox.PartitionForKey(m.Key, len(q.ids))
		} else if part < 0 || part >= len(q.ids) {
			e := fail(outbox.ErrPartitionOutOfRange)
			e.Max = len(q.ids)
			return nil, e
		}
		headers, err := encodeHeaders(withHeaders(m.Headers, extra))
		if err != nil {
			return nil, fail(err)
		}
		if size := len(m.Payload) + len(headers) + len(m.Key); size > o.cfg.MaxPayloadBytes {
			e := fail(outbox.ErrPayloadTooLarge)
			e.Size, e.Max = size, o.cfg.MaxPayloadBytes
			return nil, e
		}
		if err := outbox.ValidateDedupKey(m.DedupKey); err != nil {
			e := fail(err)
			e.DedupKey = m.DedupKey
			return nil, e
		}
		b.firstOf[i] = -1
		if m.DedupKey != "" {
			if first, ok := seen[m.DedupKey]; ok {
				b.firstOf[i] = first
			} else {
				if seen == nil {
					seen = map[string]int{}
				}
				seen[m.DedupKey] = i
				b.claims = append(b.claims, dialect.DedupClaim{Key: m.DedupKey})
				b.claimRow = append(b.claimRow, i)
			}
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{} // NOT NULL column; an empty payload is valid
		}
		b.rows[i] = dialect.MessageRow{PartitionID: q.ids[part], Key: m.Key, PayloadType: m.PayloadType, Payload: payload, Headers: headers}
	}
	ids := make([][16]byte, len(b.rows))
	if err := uuidv7.Fill(ids, time.Now()); err != nil {
		return nil, err
	}
	for i := range b.rows {
		b.rows[i].ID = ids[i]
	}
	for c, i := range b.claimRow {
		b.claims[c].ID = b.rows[i].ID
	}
	return b, nil
}

// write claims the batch's dedup keys, then inserts the messages that are
// not duplicates, on conn; it returns the rows written and sets b.results.
// It may run again for the same batch (a retried transaction), so it
// starts from the batch, never from a previous run's results.
func (o *Outbox) write(ctx context.Context, conn bun.IConn, b *batch) ([]dialect.MessageRow, error) {
	results := make([]outbox.Enqueued, len(b.rows))
	for i := range b.rows {
		results[i] = outbox.Enqueued{ID: b.rows[i].ID}
	}
	rows := b.rows
	if len(b.claims) > 0 {
		holders, err := o.d.DedupClaim(ctx, &dialect.DedupClaimParams{Conn: conn, Queue: b.queue, Window: b.window, Claims: b.claims})
		if err != nil {
			return nil, err
		}
		for c, holder := range holders {
			if i := b.claimRow[c]; holder != b.rows[i].ID {
				results[i] = outbox.Enqueued{ID: holder, Duplicate: true}
			}
		}
		rows = make([]dialect.MessageRow, 0, len(b.rows))
		for i, first := range b.firstOf {
			if first >= 0 {
				results[i] = outbox.Enqueued{ID: results[first].ID, Duplicate: true}
			}
			if !results[i].Duplicate {
				rows = append(rows, b.rows[i])
			}
		}
	}
	if len(rows) > 0 {
		if err := o.d.MessageInsertMany(ctx, &dialect.MessageInsertManyParams{
			Conn: conn, Rows: rows, ChunkRows: o.cfg.EnqueueChunkRows, ChunkBytes: o.cfg.EnqueueChunkBytes,
		}); err != nil {
			return nil, err
		}
	}
	b.results = results
	return rows, nil
}

// inSQLTx runs fn in a transaction of db, with the dialect's options (READ
// COMMITTED on MySQL), as every transaction the outbox opens.
func (o *Outbox) inSQLTx(ctx context.Context, db *sql.DB, fn func(ctx context.Context, conn bun.IConn) error) error {
	tx, err := db.BeginTx(ctx, o.d.TxOptions())
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// markCommitted signals partitions whose rows are committed now.
func (o *Outbox) markCommitted(rows []dialect.MessageRow) {
	pids := partitionsOf(rows)
	for _, pid := range pids {
		o.prio.MarkDirty(pid)
	}
	o.notify.add(pids, nil)
}

// markPending handles rows written in a transaction the caller will commit
// later: inside Transaction they are signalled after commit; otherwise the
// sequencer re-checks them for a while ("maybe dirty"), and the reconciler
// scan is the safety net.
func (o *Outbox) markPending(ctx context.Context, rows []dialect.MessageRow) {
	if col, ok := ctx.Value(txKey{o}).(*collector); ok {
		col.add(partitionsOf(rows))
		return
	}
	pids := partitionsOf(rows)
	for _, pid := range pids {
		o.prio.MarkMaybeDirty(pid)
	}
	// Perhaps before the caller commits: listeners probe for a while.
	o.notify.add(pids, nil)
}

func partitionsOf(rows []dialect.MessageRow) []int64 {
	var out []int64
	for i := range rows {
		if i == 0 || rows[i].PartitionID != rows[i-1].PartitionID {
			out = append(out, rows[i].PartitionID)
		}
	}
	return out
}
