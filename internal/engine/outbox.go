// Package engine is the running outbox behind seqbox.Outbox: it validates
// the configuration, registers the queues and wires the pipeline stages
// (prioritizer, sequencer, the processor pool, vacuum) together
// (docs/ARCHITECTURE.md, "The pipeline"). Applications never import it.
package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/configerr"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/prioritizer"
	"github.com/seqbox/seqbox/sequencer"
	"github.com/seqbox/seqbox/vacuum"
)

// Defaults of Config; the seqbox package exports them.
const (
	MaxPayloadBytesDefault   = 64 << 10
	EnqueueChunkRowsDefault  = 1000
	EnqueueChunkBytesDefault = 4 << 20
	MaybeDirtyWindowDefault  = prioritizer.ProbeWindowDefault
)

// QueueConfig registers one queue.
type QueueConfig struct {
	Name string
	// Partitions is fixed at first registration (1..1024).
	Partitions int
	// Handler consumes the queue; nil registers it for enqueueing only.
	Handler handling.Handler
	// Options are the queue's resolved options; OptionValues the options
	// as given (defaults first), for the handler's middleware.
	Options      handling.Options
	OptionValues []handling.Option
}

// Config is the whole configuration of an outbox, as seqbox.Builder
// collects it. Zero fields take their defaults (WithDefaults).
type Config struct {
	Migrate           bool
	Logger            *slog.Logger
	Queues            []QueueConfig
	MaxPayloadBytes   int
	EnqueueChunkRows  int
	EnqueueChunkBytes int
	MaybeDirtyWindow  time.Duration
	ProducerOnly      bool
	EnqueueHeaders    func(ctx context.Context, queue string) map[string]string
	NoWakeups         bool
	Sequencer         sequencer.Config
	Processor         PoolConfig
	Vacuum            vacuum.Config
}

// WithDefaults fills zero fields; the sequencer's worker count comes from
// the dialect's measured default.
func (c Config) WithDefaults(d dialect.Base) Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, MaxPayloadBytesDefault)
	c.EnqueueChunkRows = cmp.Or(c.EnqueueChunkRows, EnqueueChunkRowsDefault)
	c.EnqueueChunkBytes = cmp.Or(c.EnqueueChunkBytes, EnqueueChunkBytesDefault)
	c.MaybeDirtyWindow = cmp.Or(c.MaybeDirtyWindow, MaybeDirtyWindowDefault)
	c.Sequencer.Workers = cmp.Or(c.Sequencer.Workers, d.Tuning().SequencerWorkers)
	c.Sequencer.Logger = cmp.Or(c.Sequencer.Logger, c.Logger)
	c.Processor.Logger = cmp.Or(c.Processor.Logger, c.Logger)
	c.Vacuum.Logger = cmp.Or(c.Vacuum.Logger, c.Logger)
	c.Queues = slices.Clone(c.Queues)
	c.Sequencer = c.Sequencer.WithDefaults()
	c.Processor = c.Processor.WithDefaults()
	c.Vacuum = c.Vacuum.WithDefaults()
	return c
}

// Validate returns every setting that cannot work on d, each an
// *outbox.ConfigError naming the setting as the Builder takes it.
func (c Config) Validate(d dialect.Base) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, configerr.New(field, format, args...))
	}
	seen := map[string]bool{}
	for i, q := range c.Queues {
		field := fmt.Sprintf("Queue(%s)", q.Name)
		if err := outbox.ValidateQueueName(q.Name); err != nil {
			bad(fmt.Sprintf("Queue[%d]", i), "%v", err)
			continue
		}
		if seen[q.Name] {
			bad(field, "registered twice")
		}
		seen[q.Name] = true
		if q.Partitions < outbox.MinPartitions || q.Partitions > outbox.MaxPartitions {
			bad(field+".Partitions", "%d: must be %d..%d", q.Partitions, outbox.MinPartitions, outbox.MaxPartitions)
		}
		if c.ProducerOnly && q.Handler != nil {
			bad(field+".Handler", "a producer-only process runs no handlers")
		}
		if q.Handler != nil {
			if err := q.Handler.Validate(); err != nil {
				e := configerr.New(field+".Handler", "%v", err)
				e.Also = handling.ErrInvalidHandler
				errs = append(errs, e)
			}
		}
		errs = append(errs, q.Options.Validate(field, q.Handler != nil, q.Handler != nil && q.Handler.Transactional())...)
	}
	lim := d.Limits()
	if c.MaxPayloadBytes < 1 || c.MaxPayloadBytes > lim.MaxPayloadBytes {
		bad("MaxPayloadBytes", "%d: must be 1..%d on %s", c.MaxPayloadBytes, lim.MaxPayloadBytes, d.Name())
	}
	if c.EnqueueChunkRows < 1 || c.EnqueueChunkRows > 100000 {
		bad("EnqueueChunk", "%d rows: must be 1..100000", c.EnqueueChunkRows)
	}
	if c.EnqueueChunkBytes < 1<<10 || c.EnqueueChunkBytes > lim.MaxStatementBytes {
		bad("EnqueueChunk", "%d bytes: must be 1 KiB..%d on %s", c.EnqueueChunkBytes, lim.MaxStatementBytes, d.Name())
	}
	if c.MaybeDirtyWindow < 0 {
		bad("MaybeDirtyWindow", "%v: must be >= 0", c.MaybeDirtyWindow)
	}
	errs = append(errs, c.Sequencer.Validate()...)
	errs = append(errs, c.Processor.Validate()...)
	errs = append(errs, c.Vacuum.Validate()...)
	return errs
}

type queueInfo struct {
	name        string
	ids         []int64
	dedupWindow time.Duration
}

// Outbox is a running outbox: enqueue through it, stop it when done.
type Outbox struct {
	d   dialect.Dialect
	cfg Config
	log *slog.Logger

	queues map[string]*queueInfo

	prio  *prioritizer.Prioritizer
	seq   *sequencer.Sequencer
	procs *Pool
	vac   *vacuum.Vacuum

	enqueued   atomic.Int64
	duplicates atomic.Int64
	// notify tells other processes about this one's work; nil without.
	notify *notifier

	stopping chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	// tasks are the background tasks, and what they start that may outlive
	// the call that started it; done is closed once all have returned.
	tasks  errgroup.Group
	done   chan struct{}
	runErr error
}

// A dialect serves every stage.
var (
	_ sequencer.Store = dialect.Dialect(nil)
	_ PoolStore       = dialect.Dialect(nil)
	_ vacuum.Store    = dialect.Dialect(nil)
)

// Start validates cfg, migrates if asked, registers the queues and starts
// the background tasks. The tasks outlive ctx; end them with Stop.
// Migration and registration retry transient errors (a dropped
// connection, a deadlock) until ctx ends. Tables absent or older than this
// release, without Migrate, are an outbox.ErrSchemaMissing.
func Start(ctx context.Context, d dialect.Dialect, cfg Config) (*Outbox, error) {
	cfg = cfg.WithDefaults(d)
	if errs := cfg.Validate(d); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Migrate {
		if err := retryTransient(ctx, d, cfg.Logger, "migrate", func() error {
			return d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{})
		}); err != nil {
			return nil, err
		}
	}
	o := &Outbox{
		d: d, cfg: cfg, log: cfg.Logger, queues: make(map[string]*queueInfo),
		stopping: make(chan struct{}), done: make(chan struct{}),
	}
	// All queues or none: a mismatch on one must not leave the others
	// registered with counts the application did not end up starting with.
	defs := make([]dialect.QueueDef, len(cfg.Queues))
	for i, q := range cfg.Queues {
		defs[i] = dialect.QueueDef{Queue: q.Name, Partitions: q.Partitions}
	}
	var specs []QueueSpec
	if len(defs) > 0 {
		var allIDs [][]int64
		if err := retryTransient(ctx, d, cfg.Logger, "register queues", func() error {
			var err error
			allIDs, err = d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: defs})
			return err
		}); err != nil {
			return nil, schemaMissing(ctx, d, err)
		}
		for i, q := range cfg.Queues {
			o.queues[q.Name] = &queueInfo{name: q.Name, ids: allIDs[i], dedupWindow: q.Options.DedupWindow}
			spec := QueueSpec{Name: q.Name, Options: q.Options, PartitionIDs: allIDs[i]}
			if q.Handler != nil {
				spec.Transactional = q.Handler.Transactional()
				spec.Runner = q.Handler.Bind(q.OptionValues)
			}
			specs = append(specs, spec)
		}
	}
	if !cfg.ProducerOnly {
		// Prepared now, while Start holds no connection: a statement first
		// run inside a transaction is then never prepared for that one run.
		if err := retryTransient(ctx, d, cfg.Logger, "prepare statements", func() error { return d.Prepare(ctx) }); err != nil {
			return nil, err
		}
	}
	o.prio = prioritizer.New(prioritizer.Config{ProbeWindow: cfg.MaybeDirtyWindow})
	o.procs = NewPool(d, cfg.Processor, specs)
	if wn, ok := d.(dialect.WakeupNotifier); ok && !cfg.NoWakeups {
		o.notify = newNotifier(wn, cfg.Processor.Owner, cfg.Logger)
	}
	o.seq = sequencer.New(d, o.prio, func(pid int64) {
		o.procs.Notify(pid)
		o.notify.add(nil, []int64{pid}) // processors of other processes
	}, cfg.Sequencer)
	o.vac = vacuum.New(d, cfg.Vacuum)

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.cancel = cancel
	g := &o.tasks
	if o.notify != nil {
		g.Go(func() error { o.notify.run(runCtx, o.stopping); return nil })
	}
	if !cfg.ProducerOnly {
		g.Go(func() error { return o.seq.Run(runCtx, o.stopping) })
		g.Go(func() error { return o.procs.Run(runCtx, o.stopping) })
		g.Go(func() error { return o.vac.Run(runCtx, o.stopping) })
		if wl, ok := d.(dialect.WakeupListener); ok && !cfg.NoWakeups {
			g.Go(func() error { o.listen(runCtx, wl); return nil })
		}
	}
	go func() {
		o.runErr = g.Wait()
		// The dialect's statements go once nothing can run them: the tasks
		// have ended and Stop was called (a producer-only outbox may have
		// no task at all). Each Start makes its own dialect, so they would
		// otherwise stay open on pooled connections for good.
		<-o.stopping
		if err := d.Release(); err != nil {
			o.log.Warn("closing prepared statements failed", slog.Any("error", err))
		}
		close(o.done)
	}()
	return o, nil
}

// schemaMissing turns a registration failure on tables that are absent or
// older than this release into ErrSchemaMissing naming the fixes: the
// driver's bare "relation does not exist" does not say what to do. The
// version is read only after a failure, so a healthy Start pays nothing.
func schemaMissing(ctx context.Context, d dialect.Dialect, err error) error {
	st, serr := d.SchemaStatus(ctx, &dialect.SchemaStatusParams{})
	if serr != nil || st.Current >= st.Latest {
		return err // not a schema problem, or one we cannot tell: the original says more
	}
	prefix := d.Tables().Prefix
	found := fmt.Sprintf("tables %s* do not exist", prefix)
	if st.Current > 0 {
		found = fmt.Sprintf("tables %s* are at schema version %d, this release needs %d", prefix, st.Current, st.Latest)
	}
	flag := ""
	if prefix != dialect.DefaultPrefix {
		flag = " --prefix " + prefix
	}
	return fmt.Errorf("%w: %s: run `seqbox migrate --dsn …%s`, or build the outbox with Migrate(true), "+
		"or apply seqbox.Migrations(%q) with bun/migrate (%w)", outbox.ErrSchemaMissing, found, flag, prefix, err)
}

// retryTransient runs fn until it succeeds, fails for good, or ctx ends
// (lifecycle.Retry, with the dialect's classification).
func retryTransient(ctx context.Context, d dialect.Base, log *slog.Logger, what string, fn func() error) error {
	return lifecycle.Retry(ctx, log, what, d.IsTransient, fn)
}

// Stop stops taking new work and waits for in-flight batches to finish.
// If ctx ends first, it cancels them and returns ctx's error at once, as
// http.Server.Shutdown does: their transactions roll back and their
// leases expire, so another process (or the next start) redelivers them
// and nothing is lost. A handler that ignores its context may still be
// running when Stop returns; Stopped is closed once every task has ended.
// Safe to call more than once.
func (o *Outbox) Stop(ctx context.Context) error {
	o.stopOnce.Do(func() { close(o.stopping) })
	select {
	case <-o.done:
		o.cancel()
		return o.runErr
	case <-ctx.Done():
		o.cancel()
		return ctx.Err()
	}
}

// Stopped is closed once every background task has ended and the
// statements the outbox prepared are closed: after Stop returned, or later
// when Stop's context ended before a handler did.
func (o *Outbox) Stopped() <-chan struct{} { return o.done }

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

// extraHeaders are Config.EnqueueHeaders' headers for one call, or nil. A
// panic in the hook is the enqueue's error, not the caller's crash.
func (o *Outbox) extraHeaders(ctx context.Context, queue string) (extra map[string]string) {
	if o.cfg.EnqueueHeaders == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			o.log.Error("EnqueueHeaders panicked; enqueued without its headers", slog.Any("panic", r))
			extra = nil
		}
	}()
	return o.cfg.EnqueueHeaders(ctx, queue)
}

// withHeaders is h plus the extra headers h does not set, as a new map when
// there is anything to add.
func withHeaders(h, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return h
	}
	out := make(map[string]string, len(h)+len(extra))
	maps.Copy(out, extra)
	maps.Copy(out, h)
	return out
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

type txKey struct{ o *Outbox }

type collector struct {
	mu  sync.Mutex
	ids map[int64]struct{}
}

func (c *collector) add(ids []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.ids[id] = struct{}{}
	}
}

// Transaction runs fn in a transaction on the outbox's database (READ
// COMMITTED on MySQL/MariaDB, as every outbox transaction) and, once it has
// committed, wakes the sequencer for every partition fn enqueued to.
// Enqueue inside fn with the tx it receives. On SQLite the transaction
// queues on the process's single writer and holds it: another write
// transaction started inside fn with its ctx (Transaction, Enqueue on a
// *bun.DB) returns ErrWriterHeld; one started with an unrelated context
// would wait for ever.
func (o *Outbox) Transaction(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", outbox.ErrNilConn)
	}
	col := &collector{ids: make(map[int64]struct{})}
	ctx = context.WithValue(ctx, txKey{o}, col)
	err := o.withWriter(ctx, func(ctx context.Context) error { return o.d.DB().RunInTx(ctx, o.d.TxOptions(), fn) })
	if err != nil {
		return err
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	ids := make([]int64, 0, len(col.ids))
	for id := range col.ids {
		o.prio.MarkDirty(id)
		ids = append(ids, id)
	}
	o.notify.add(ids, nil)
	return nil
}

// Flush wakes the sequencer now for partitions enqueued through caller-owned
// transactions: call it after such a transaction commits for the lowest
// latency (Transaction does this for you).
func (o *Outbox) Flush() { o.prio.Flush() }

// WaitProcessed returns when every given message has been acked (or
// dead-lettered), or with a *outbox.PendingError when ctx ends first. Ids that
// were never committed count as done.
func (o *Outbox) WaitProcessed(ctx context.Context, ids ...outbox.MessageID) error {
	delay := 2 * time.Millisecond
	for {
		pending, err := o.pending(ctx, ids)
		if err != nil {
			if ctx.Err() != nil {
				return &outbox.PendingError{IDs: ids, Err: ctx.Err()}
			}
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		if !lifecycle.Sleep(ctx, delay) {
			return &outbox.PendingError{IDs: pending, Err: ctx.Err()}
		}
		ids = pending
		delay = min(delay*2, 250*time.Millisecond)
	}
}

func (o *Outbox) pending(ctx context.Context, ids []outbox.MessageID) ([]outbox.MessageID, error) {
	return o.d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: ids})
}

// Counters returns the process counters (cheap: no database access).
func (o *Outbox) Counters() outbox.Counters {
	pc := o.procs.Counters()
	return outbox.Counters{
		Enqueued: o.enqueued.Load(), Duplicates: o.duplicates.Load(), Sequenced: o.seq.Sequenced(), Delivered: pc.Delivered,
		Retried: pc.Retried, DeadLettered: pc.DeadLettered, Parked: pc.Parked, Purged: pc.Purged, Vacuumed: o.vac.Deleted(),
		DedupKeysExpired: o.vac.ExpiredKeys(),
	}
}

// Stats reads every partition's backlog and dead letters from the database.
func (o *Outbox) Stats(ctx context.Context) (outbox.Stats, error) {
	ps, err := ReadStats(ctx, o.d)
	if err != nil {
		return outbox.Stats{}, err
	}
	return outbox.Stats{Counters: o.Counters(), Partitions: ps, Queues: outbox.QueueTotals(ps)}, nil
}

// ReadStats reads every partition's backlog and dead letters from the
// database, without a running Outbox (seqbox.Stats, the CLI's status).
func ReadStats(ctx context.Context, s dialect.Dialect) ([]outbox.PartitionStats, error) {
	ps, err := s.PartitionStats(ctx, &dialect.PartitionStatsParams{})
	if err != nil {
		return nil, err
	}
	dls, err := s.DeadLetterCount(ctx, &dialect.DeadLetterCountParams{})
	if err != nil {
		return nil, err
	}
	byPartition := map[int64]map[string]int64{}
	for _, d := range dls {
		if byPartition[d.PartitionID] == nil {
			byPartition[d.PartitionID] = map[string]int64{}
		}
		byPartition[d.PartitionID][d.Status] = d.Count
	}
	out := make([]outbox.PartitionStats, len(ps))
	for i, p := range ps {
		out[i] = outbox.PartitionStats{
			Queue: p.Queue, Partition: p.Partition, Incoming: p.Incoming, Unprocessed: p.Sequence - p.ProcessedSeq,
			ProcessedSeq: p.ProcessedSeq, Sequence: p.Sequence, OldestIncoming: p.OldestIncoming,
			OldestUnprocessed: earliest(p.OldestOutgoing, p.OldestIncoming),
			Attempts:          p.Attempts, LastError: p.LastError, NextAttemptAt: p.NextAttemptAt, LockedUntil: p.LockedUntil,
			Parked: !p.ParkedAt.IsZero(), ParkedAt: p.ParkedAt, DeadLetters: byPartition[p.PartitionID],
		}
	}
	return out, nil
}

// Reconcile scans the incoming table now (the periodic safety net), for
// tools and tests that cannot wait for the next scan.
func (o *Outbox) Reconcile(ctx context.Context) error { return o.seq.Reconcile(ctx) }

// Sweep runs one vacuum pass now and returns the messages it pruned.
func (o *Outbox) Sweep(ctx context.Context) (int, error) { return o.vac.Sweep(ctx) }

// PartitionIDs returns a registered queue's partition row ids (tests, tools).
func (o *Outbox) PartitionIDs(queue string) []int64 {
	if q := o.queues[queue]; q != nil {
		return append([]int64(nil), q.ids...)
	}
	return nil
}

// earliest is the earlier of two times, a zero time counting as none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// captureKey carries a Capture through a Start context.
type captureKey struct{}

// Capture receives the engine behind a seqbox.Outbox started with a
// context from WithCapture: the suite's and the bench's way to reach
// Sweep, Reconcile and PartitionIDs, which are no part of the public API.
type Capture struct{ Outbox *Outbox }

// WithCapture returns ctx carrying c.
func WithCapture(ctx context.Context, c *Capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// Captured stores o in the Capture ctx carries, if any.
func Captured(ctx context.Context, o *Outbox) {
	if c, ok := ctx.Value(captureKey{}).(*Capture); ok && c != nil {
		c.Outbox = o
	}
}

// Dialect is the dialect the outbox runs on.
func (o *Outbox) Dialect() dialect.Dialect { return o.d }

// Notify wakes the processors of a partition this process works.
func (o *Outbox) Notify(partitionID int64) { o.procs.Notify(partitionID) }

// MarkDirty wakes the sequencer for partitions with new incoming rows.
func (o *Outbox) MarkDirty(partitionIDs []int64) {
	for _, pid := range partitionIDs {
		o.prio.MarkDirty(pid)
	}
}

// ValidateOnly reports cfg's mistakes without starting anything (the
// Builder joins them with its own).
func ValidateOnly(d dialect.Dialect, cfg Config) error {
	return errors.Join(cfg.WithDefaults(d).Validate(d)...)
}
