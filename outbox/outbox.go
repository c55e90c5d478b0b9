// Package outbox is the handle applications hold: enqueue messages inside
// their own SQL transactions, and run the pipeline that delivers them.
// Build it with seqbox.New(db)...Start(ctx); see the seqbox package.
package outbox

import (
	"cmp"
	"context"
	"database/sql"
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

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/configerr"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/internal/uuidv7"
	"github.com/seqbox/seqbox/prioritizer"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/sequencer"
	"github.com/seqbox/seqbox/vacuum"
)

// MessageID is a message's client-generated UUIDv7: one identity from
// producer to handler to dead letter, usable as an idempotency key.
type MessageID = dialect.MessageID

// Message is one message to enqueue.
type Message struct {
	// Key, when set, picks the partition: PartitionForKey(Key, n), so every
	// message of one key stays in order. Leave Partition zero then.
	Key string
	// Partition is the 0-based partition when Key is empty.
	Partition int
	// PayloadType names the payload's format (1..255 printable ASCII), e.g.
	// "order.created.v1".
	PayloadType string
	Payload     []byte
	// Headers travel with the message (stored as a JSON object). Keys and
	// values must be valid UTF-8 (ErrInvalidHeaders otherwise); they are
	// delivered exactly as given.
	Headers map[string]string
	// DedupKey, when set, makes the enqueue idempotent: a message whose
	// DedupKey was enqueued to the same queue within the queue's dedup
	// window (processor.DedupWindow, default 24h) is not written again, and
	// the enqueue returns the first message's id (EnqueueResult says it was
	// a duplicate). At most 255 bytes of valid UTF-8.
	DedupKey string
}

// Defaults of Config, in one place.
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
	// Handler consumes the queue; nil registers it for enqueueing only (a
	// producer-only process), and other processes consume it.
	Handler *processor.Handler
	// Options tune the queue's processing; zero fields take their defaults.
	Options processor.QueueOptions
}

// Config is the whole configuration of an outbox. Zero fields take their
// defaults (see each field); Builder produces one.
type Config struct {
	// Migrate creates or upgrades the schema in Start. Defaults to false.
	Migrate bool
	// Logger receives every task's warnings and errors. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Queues are registered at Start, all or none. Defaults to none (an
	// outbox that only serves WaitProcessed and Stats).
	Queues []QueueConfig
	// MaxPayloadBytes bounds payload plus headers plus key of one message. Defaults
	// to 64 KiB; at most the dialect's cap (one row must fit one statement).
	MaxPayloadBytes int
	// EnqueueChunkRows and EnqueueChunkBytes bound one multi-row INSERT
	// (bun inlines values, bytes as hex). Default 1000 rows and 4 MiB.
	EnqueueChunkRows  int
	EnqueueChunkBytes int
	// MaybeDirtyWindow is how long a partition enqueued through a
	// caller-owned transaction is re-checked for its rows. Defaults to 1s.
	MaybeDirtyWindow time.Duration
	// ProducerOnly runs no background task in this process: it only
	// enqueues, and other processes sequence, deliver and vacuum (their
	// reconciler scan finds the rows). No queue may have a handler.
	// Defaults to false.
	ProducerOnly bool
	// EnqueueHeaders, when set, is called once per Enqueue call with its
	// context and queue; the headers it returns are added to every message
	// of the call that does not set them itself (the caller's maps are not
	// changed). Trace context propagation uses it (the otel module).
	// Defaults to none.
	EnqueueHeaders func(ctx context.Context, queue string) map[string]string
	// NoWakeups turns off listening for other processes' commits
	// (PostgreSQL LISTEN; see docs/ARCHITECTURE.md, "Wake-ups across
	// processes"): work they enqueue or sequence is then found by polling
	// (ReconcileInterval, PollInterval). Defaults to false (listen).
	NoWakeups bool
	// Sequencer, Processor and Vacuum tune the background tasks; every
	// field of each documents its default in its own package.
	Sequencer sequencer.Config
	Processor processor.Config
	Vacuum    vacuum.Config
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, MaxPayloadBytesDefault)
	c.EnqueueChunkRows = cmp.Or(c.EnqueueChunkRows, EnqueueChunkRowsDefault)
	c.EnqueueChunkBytes = cmp.Or(c.EnqueueChunkBytes, EnqueueChunkBytesDefault)
	c.MaybeDirtyWindow = cmp.Or(c.MaybeDirtyWindow, MaybeDirtyWindowDefault)
	c.Sequencer.Logger = cmp.Or(c.Sequencer.Logger, c.Logger)
	c.Processor.Logger = cmp.Or(c.Processor.Logger, c.Logger)
	c.Vacuum.Logger = cmp.Or(c.Vacuum.Logger, c.Logger)
	c.Queues = slices.Clone(c.Queues)
	for i := range c.Queues {
		c.Queues[i].Options = c.Queues[i].Options.WithDefaults()
	}
	c.Sequencer = c.Sequencer.WithDefaults()
	c.Processor = c.Processor.WithDefaults()
	c.Vacuum = c.Vacuum.WithDefaults()
	return c
}

// Validate checks the configuration against the dialect's limits.
func (c Config) Validate(d dialect.Base) error {
	bad := func(field, format string, args ...any) error {
		return configerr.New(field, format, args...)
	}
	seen := map[string]bool{}
	for i, q := range c.Queues {
		if err := ValidateQueueName(q.Name); err != nil {
			return bad(fmt.Sprintf("Queues[%d]", i), "%v", err)
		}
		if seen[q.Name] {
			return bad("Queues", "queue %q registered twice", q.Name)
		}
		seen[q.Name] = true
		if q.Partitions < MinPartitions || q.Partitions > MaxPartitions {
			return bad("Queues["+q.Name+"].Partitions", "%d: must be %d..%d", q.Partitions, MinPartitions, MaxPartitions)
		}
		if err := q.Options.Validate(); err != nil {
			return configerr.In("Queues["+q.Name+"].Options", err)
		}
		if c.ProducerOnly && q.Handler != nil {
			return bad("Queues["+q.Name+"].Handler", "a producer-only process runs no handlers")
		}
		if q.Handler != nil {
			if err := q.Handler.Validate(); err != nil {
				return bad("Queues["+q.Name+"].Handler", "%v", err)
			}
		}
	}
	switch {
	case c.MaxPayloadBytes < 1 || c.MaxPayloadBytes > d.Limits().MaxPayloadBytes:
		return bad("MaxPayloadBytes", "%d: must be 1..%d on %s", c.MaxPayloadBytes, d.Limits().MaxPayloadBytes, d.Name())
	case c.EnqueueChunkRows < 1 || c.EnqueueChunkRows > 100000:
		return bad("EnqueueChunkRows", "%d: must be 1..100000", c.EnqueueChunkRows)
	case c.EnqueueChunkBytes < 1<<10 || c.EnqueueChunkBytes > d.Limits().MaxStatementBytes:
		return bad("EnqueueChunkBytes", "%d: must be 1 KiB..%d on %s", c.EnqueueChunkBytes, d.Limits().MaxStatementBytes, d.Name())
	case c.MaybeDirtyWindow < 0:
		return bad("MaybeDirtyWindow", "must be >= 0")
	}
	if err := c.Sequencer.Validate(); err != nil {
		return configerr.In("Sequencer", err)
	}
	if err := c.Processor.Validate(); err != nil {
		return configerr.In("Processor", err)
	}
	if err := c.Vacuum.Validate(); err != nil {
		return configerr.In("Vacuum", err)
	}
	return nil
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
	procs *processor.Pool
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

// EnqueueStore is what enqueueing and registration need from the SQL layer.
type EnqueueStore interface {
	dialect.Base
	QueueRegister(ctx context.Context, params *dialect.QueueRegisterParams) ([][]int64, error)
	MessageInsertMany(ctx context.Context, params *dialect.MessageInsertManyParams) error
	DedupClaim(ctx context.Context, params *dialect.DedupClaimParams) ([]dialect.MessageID, error)
	MessagePendingList(ctx context.Context, params *dialect.MessagePendingListParams) ([]dialect.MessageID, error)
}

// StatsStore is what Stats needs from the SQL layer.
type StatsStore interface {
	PartitionStats(ctx context.Context, params *dialect.PartitionStatsParams) ([]dialect.PartitionStats, error)
	DeadLetterCount(ctx context.Context, params *dialect.DeadLetterCountParams) ([]dialect.DeadLetterCount, error)
}

// SchemaStore is what migrations need from the SQL layer.
type SchemaStore interface {
	SchemaMigrate(ctx context.Context, params *dialect.SchemaMigrateParams) error
	SchemaDrop(ctx context.Context, params *dialect.SchemaDropParams) error
}

// A dialect serves every consumer.
var (
	_ EnqueueStore         = dialect.Dialect(nil)
	_ StatsStore           = dialect.Dialect(nil)
	_ SchemaStore          = dialect.Dialect(nil)
	_ sequencer.Store      = dialect.Dialect(nil)
	_ processor.Store      = dialect.Dialect(nil)
	_ processor.AdminStore = dialect.Dialect(nil)
	_ vacuum.Store         = dialect.Dialect(nil)
	_ deadletter.Store     = dialect.Dialect(nil)
)

// Start validates cfg, migrates if asked, registers the queues and starts
// the background tasks. The tasks outlive ctx; end them with Stop.
// Migration and registration retry transient errors (a dropped
// connection, a deadlock) until ctx ends.
func Start(ctx context.Context, d dialect.Dialect, cfg Config) (*Outbox, error) {
	if cfg.Sequencer.Workers == 0 {
		cfg.Sequencer.Workers = d.Tuning().SequencerWorkers
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(d); err != nil {
		return nil, err
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
	var specs []processor.QueueSpec
	if len(defs) > 0 {
		var allIDs [][]int64
		if err := retryTransient(ctx, d, cfg.Logger, "register queues", func() error {
			var err error
			allIDs, err = d.QueueRegister(ctx, &dialect.QueueRegisterParams{Queues: defs})
			return err
		}); err != nil {
			return nil, err
		}
		for i, q := range cfg.Queues {
			o.queues[q.Name] = &queueInfo{name: q.Name, ids: allIDs[i], dedupWindow: q.Options.DedupWindow}
			specs = append(specs, processor.QueueSpec{Name: q.Name, Handler: q.Handler, Options: q.Options, PartitionIDs: allIDs[i]})
		}
	}
	o.prio = prioritizer.New(prioritizer.Config{ProbeWindow: cfg.MaybeDirtyWindow})
	o.procs = processor.NewPool(d, cfg.Processor, specs)
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
		close(o.done)
	}()
	return o, nil
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

// Stopped is closed once every background task has ended: after Stop
// returned, or later when Stop's context ended before a handler did.
func (o *Outbox) Stopped() <-chan struct{} { return o.done }

// Enqueued is what an enqueue did with one message.
type Enqueued struct {
	// ID is the message's id; for a duplicate, the id of the message that
	// holds its DedupKey.
	ID MessageID
	// Duplicate: the message's DedupKey was enqueued to the queue within
	// the queue's dedup window, or earlier in the same batch, so this
	// message was not written.
	Duplicate bool
}

// Enqueue writes one message on conn (usually the caller's transaction) and
// returns its id, or the first message's id when m is a duplicate (see
// Message.DedupKey and EnqueueResult). See EnqueueBatch.
func (o *Outbox) Enqueue(ctx context.Context, conn bun.IConn, queue string, m Message) (MessageID, error) {
	res, err := o.EnqueueResult(ctx, conn, queue, m)
	return res.ID, err
}

// EnqueueResult is Enqueue, also saying whether m was a duplicate.
func (o *Outbox) EnqueueResult(ctx context.Context, conn bun.IConn, queue string, m Message) (Enqueued, error) {
	res, err := o.EnqueueBatchResult(ctx, conn, queue, []Message{m})
	if err != nil {
		return Enqueued{}, err
	}
	return res[0], nil
}

// EnqueueBatch is EnqueueBatchResult returning only the ids, in order.
func (o *Outbox) EnqueueBatch(ctx context.Context, conn bun.IConn, queue string, msgs []Message) ([]MessageID, error) {
	res, err := o.EnqueueBatchResult(ctx, conn, queue, msgs)
	if err != nil {
		return nil, err
	}
	ids := make([]MessageID, len(res))
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
func (o *Outbox) EnqueueBatchResult(ctx context.Context, conn bun.IConn, queue string, msgs []Message) ([]Enqueued, error) {
	b, err := o.prepare(queue, msgs, o.extraHeaders(ctx, queue))
	if err != nil {
		return nil, err
	}
	if err := o.checkOpen(); err != nil {
		return nil, err
	}
	if isNilConn(conn) {
		return nil, ErrNilConn
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
		return ErrWriterHeld
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
		return ErrStopped
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
	results []Enqueued
}

// prepare validates the whole batch and builds the rows, before any write.
func (o *Outbox) prepare(queue string, msgs []Message, extra map[string]string) (*batch, error) {
	if err := ValidateQueueName(queue); err != nil {
		return nil, err
	}
	q := o.queues[queue]
	if q == nil {
		return nil, &QueueError{Queue: queue}
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w for queue %q", ErrEmptyBatch, queue)
	}
	b := &batch{queue: queue, window: q.dedupWindow, rows: make([]dialect.MessageRow, len(msgs)), firstOf: make([]int, len(msgs))}
	var seen map[string]int
	for i := range msgs {
		m := &msgs[i]
		fail := func(err error) *MessageError {
			return &MessageError{Index: i, Queue: queue, Partition: m.Partition, PayloadType: m.PayloadType, Err: err}
		}
		if err := ValidatePayloadType(m.PayloadType); err != nil {
			return nil, fail(err)
		}
		part := m.Partition
		if m.Key != "" {
			if m.Partition != 0 {
				return nil, fail(ErrKeyAndPartition)
			}
			part = PartitionForKey(m.Key, len(q.ids))
		} else if part < 0 || part >= len(q.ids) {
			e := fail(ErrPartitionOutOfRange)
			e.Max = len(q.ids)
			return nil, e
		}
		headers, err := EncodeHeaders(withHeaders(m.Headers, extra))
		if err != nil {
			return nil, fail(err)
		}
		if size := len(m.Payload) + len(headers) + len(m.Key); size > o.cfg.MaxPayloadBytes {
			e := fail(ErrPayloadTooLarge)
			e.Size, e.Max = size, o.cfg.MaxPayloadBytes
			return nil, e
		}
		if err := ValidateDedupKey(m.DedupKey); err != nil {
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
	results := make([]Enqueued, len(b.rows))
	for i := range b.rows {
		results[i] = Enqueued{ID: b.rows[i].ID}
	}
	rows := b.rows
	if len(b.claims) > 0 {
		holders, err := o.d.DedupClaim(ctx, &dialect.DedupClaimParams{Conn: conn, Queue: b.queue, Window: b.window, Claims: b.claims})
		if err != nil {
			return nil, err
		}
		for c, holder := range holders {
			if i := b.claimRow[c]; holder != b.rows[i].ID {
				results[i] = Enqueued{ID: holder, Duplicate: true}
			}
		}
		rows = make([]dialect.MessageRow, 0, len(b.rows))
		for i, first := range b.firstOf {
			if first >= 0 {
				results[i] = Enqueued{ID: results[first].ID, Duplicate: true}
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
		return fmt.Errorf("%w: nil function", ErrNilConn)
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

// DeadLetters lists and acts on this outbox's dead letters. A replay is
// picked up by this process's sequencer at once (by others' at their next
// reconcile scan).
func (o *Outbox) DeadLetters() *deadletter.Admin {
	return deadletter.NewAdmin(o.d, func(pids []int64) {
		for _, pid := range pids {
			o.prio.MarkDirty(pid)
		}
	})
}

// Partitions lists parked partitions and resumes or skips them (the Park
// failure policy). A partition this process works is picked up at once;
// other processes find it at their next poll.
func (o *Outbox) Partitions() *processor.Admin {
	return processor.NewAdmin(o.d, o.procs.Notify)
}

// Flush wakes the sequencer now for partitions enqueued through caller-owned
// transactions: call it after such a transaction commits for the lowest
// latency (Transaction does this for you).
func (o *Outbox) Flush() { o.prio.Flush() }

// WaitProcessed returns when every given message has been acked (or
// dead-lettered), or with a *PendingError when ctx ends first. Ids that
// were never committed count as done.
func (o *Outbox) WaitProcessed(ctx context.Context, ids ...MessageID) error {
	delay := 2 * time.Millisecond
	for {
		pending, err := o.pending(ctx, ids)
		if err != nil {
			if ctx.Err() != nil {
				return &PendingError{IDs: ids, Err: ctx.Err()}
			}
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		if !lifecycle.Sleep(ctx, delay) {
			return &PendingError{IDs: pending, Err: ctx.Err()}
		}
		ids = pending
		delay = min(delay*2, 250*time.Millisecond)
	}
}

func (o *Outbox) pending(ctx context.Context, ids []MessageID) ([]MessageID, error) {
	return o.d.MessagePendingList(ctx, &dialect.MessagePendingListParams{IDs: ids})
}

// Counters are this process's pipeline counts since Start.
type Counters struct {
	// Enqueued counts messages written by Enqueue calls, including those
	// whose caller-owned transaction later rolled back.
	Enqueued int64
	// Duplicates counts messages not written because their DedupKey was
	// taken (the same caveat applies).
	Duplicates   int64
	Sequenced    int64
	Delivered    int64
	Retried      int64
	DeadLettered int64
	// Parked counts partitions this process parked (the Park policy).
	Parked int64
	// Purged counts purged messages this process's processors passed
	// over (they had a seq already; see Purge) without a handler call.
	Purged   int64
	Vacuumed int64
	// DedupKeysExpired counts dedup keys this process's vacuum pruned.
	DedupKeysExpired int64
}

// Counters returns the process counters (cheap: no database access).
func (o *Outbox) Counters() Counters {
	pc := o.procs.Counters()
	return Counters{
		Enqueued: o.enqueued.Load(), Duplicates: o.duplicates.Load(), Sequenced: o.seq.Sequenced(), Delivered: pc.Delivered,
		Retried: pc.Retried, DeadLettered: pc.DeadLettered, Parked: pc.Parked, Purged: pc.Purged, Vacuumed: o.vac.Deleted(),
		DedupKeysExpired: o.vac.ExpiredKeys(),
	}
}

// PartitionStats is one partition's state in the database.
type PartitionStats struct {
	Queue     string
	Partition int
	// Incoming is the number of committed messages not yet sequenced.
	Incoming int64
	// Unprocessed is the number sequenced but not yet acked.
	Unprocessed int64
	// ProcessedSeq is the cursor; Sequence the last seq handed out.
	ProcessedSeq, Sequence int64
	// OldestIncoming is when the first unsequenced message in line (the
	// lowest incoming id) was enqueued, by the database clock; zero when
	// Incoming is 0.
	OldestIncoming time.Time
	// OldestUnprocessed is when the oldest message not yet acked was
	// enqueued, sequenced or not (the head of the partition's line); zero
	// when nothing waits. Now minus it is how far behind the partition is.
	OldestUnprocessed time.Time
	// Attempts and LastError describe a failing head message.
	Attempts      int
	LastError     string
	NextAttemptAt time.Time
	LockedUntil   time.Time
	// Parked: the head failed MaxAttempts times under the Park policy and
	// the partition waits for an operator (Outbox.Partitions) since ParkedAt.
	Parked   bool
	ParkedAt time.Time
	// DeadLetters counts dead letters by status.
	DeadLetters map[string]int64
}

// Retrying reports a partition whose head failed and will be retried: a
// failure was recorded (a lease alone counts an attempt too), and it is
// not parked.
func (p PartitionStats) Retrying() bool {
	return !p.Parked && (p.LastError != "" || !p.NextAttemptAt.IsZero())
}

// QueueStats sums one queue's partitions.
type QueueStats struct {
	Queue       string
	Partitions  int
	Incoming    int64
	Unprocessed int64
	// OldestUnprocessed is the earliest of its partitions'.
	OldestUnprocessed time.Time
	// Retrying counts partitions whose head failed and will be retried;
	// Parked those stopped at their head.
	Retrying, Parked int
	DeadLetters      map[string]int64
}

// Stats is a snapshot of the outbox.
type Stats struct {
	Partitions []PartitionStats
	// Queues are the per-queue totals of Partitions, by queue name.
	Queues   []QueueStats
	Counters Counters
}

// QueueTotals sums partitions' figures per queue, in queue-name order.
func QueueTotals(ps []PartitionStats) []QueueStats {
	var out []QueueStats
	index := map[string]int{}
	for _, p := range ps {
		i, ok := index[p.Queue]
		if !ok {
			i = len(out)
			index[p.Queue] = i
			out = append(out, QueueStats{Queue: p.Queue, DeadLetters: map[string]int64{}})
		}
		q := &out[i]
		q.Partitions++
		q.Incoming += p.Incoming
		q.Unprocessed += p.Unprocessed
		q.OldestUnprocessed = earliest(q.OldestUnprocessed, p.OldestUnprocessed)
		switch {
		case p.Parked:
			q.Parked++
		case p.Retrying():
			q.Retrying++
		}
		for st, n := range p.DeadLetters {
			q.DeadLetters[st] += n
		}
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return cmp.Compare(a.Queue, b.Queue) })
	return out
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

// Stats reads every partition's backlog and dead letters from the database.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	ps, err := ReadStats(ctx, o.d)
	if err != nil {
		return Stats{}, err
	}
	return Stats{Counters: o.Counters(), Partitions: ps, Queues: QueueTotals(ps)}, nil
}

// ReadStats reads every partition's backlog and dead letters from the
// database, without a running Outbox (seqbox.Stats, the CLI's status).
func ReadStats(ctx context.Context, s StatsStore) ([]PartitionStats, error) {
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
	out := make([]PartitionStats, len(ps))
	for i, p := range ps {
		out[i] = PartitionStats{
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
