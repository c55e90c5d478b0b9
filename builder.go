// Package seqbox is a transactional outbox with strict per-partition order
// for PostgreSQL, MySQL/MariaDB and SQLite, on bun.
//
// Applications enqueue messages in the same SQL transaction as their
// business writes; seqbox delivers every committed message to its queue's
// handler at least once (exactly once for database effects in
// transactional mode), in enqueue order within a partition, with
// partitions worked in parallel across any number of processes sharing one
// database.
//
// Build an outbox with New(db), register queues with Queue, and Start it;
// enqueue with Outbox.Enqueue inside your transactions. Handlers and queue
// options are in package processor, messages in package outbox, dead-letter
// types in package deadletter. Operators use Admin (or the seqbox command).
package seqbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	bundialect "github.com/uptrace/bun/dialect"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/internal/configerr"
	"github.com/seqbox/seqbox/internal/dialects"
	"github.com/seqbox/seqbox/internal/engine"
	"github.com/seqbox/seqbox/internal/handling"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/processor"
	"github.com/seqbox/seqbox/sequencer"
	"github.com/seqbox/seqbox/vacuum"
)

// Defaults of the Builder's settings. A setting left alone, or set to
// zero, takes its default; a negative value means "never" where a setting
// says so, and is an error elsewhere.
const (
	DefaultPrefix                  = dialect.DefaultPrefix
	MaxPayloadBytesDefault         = engine.MaxPayloadBytesDefault
	EnqueueChunkRowsDefault        = engine.EnqueueChunkRowsDefault
	EnqueueChunkBytesDefault       = engine.EnqueueChunkBytesDefault
	MaybeDirtyWindowDefault        = engine.MaybeDirtyWindowDefault
	ProcessorConcurrencyDefault    = engine.ConcurrencyDefault
	PollIntervalDefault            = engine.PollIntervalDefault
	SequencerBatchSizeDefault      = sequencer.BatchSizeDefault
	SequencerMaxIterationsDefault  = sequencer.MaxInnerIterationsDefault
	SequencerMovePartitionsDefault = sequencer.MovePartitionsDefault
	ReconcileIntervalDefault       = sequencer.ReconcileIntervalDefault
	VacuumIntervalDefault          = vacuum.IntervalDefault
	VacuumChunkDefault             = vacuum.ChunkDefault
	TableVacuumIntervalDefault     = vacuum.TableIntervalDefault
	RotateIntervalDefault          = vacuum.RotateIntervalDefault
	RotateSizeDefault              = vacuum.RotateSizeDefault
)

// Builder collects an outbox's configuration; Start validates it and runs
// the outbox. It is the one way to configure seqbox: each method sets one
// setting, documented with its default, and a later call of the same
// method replaces the earlier one (Queue and QueueDefaults add). Methods
// never panic and never fail: Start reports every mistake at once, each a
// *ConfigError naming the method it is about, joined with errors.Join.
type Builder struct {
	db            *bun.DB
	prefix        string
	cfg           engine.Config
	queueDefaults []processor.QueueOption
	queues        []queueDecl
	pgOpts        []postgres.Option
	errs          []error
}

type queueDecl struct {
	name       string
	partitions int
	handler    processor.Handler
	opts       []processor.QueueOption
}

// New starts a builder for db: a *bun.DB on PostgreSQL (any driver),
// MySQL/MariaDB or SQLite.
func New(db *bun.DB) *Builder {
	return &Builder{db: db, prefix: DefaultPrefix}
}

// TablePrefix sets the prefix of seqbox's table names: 1..32 of
// [a-z0-9_], not starting with a digit. Defaults to DefaultPrefix
// ("seqbox_").
func (b *Builder) TablePrefix(prefix string) *Builder { b.prefix = prefix; return b }

// Migrate creates or upgrades the schema in Start (under a database lock;
// idempotent). Without it Start expects the schema to exist (seqbox
// migrate, Admin.Migrate or Migrations). Defaults to false.
func (b *Builder) Migrate(on bool) *Builder { b.cfg.Migrate = on; return b }

// Logger receives every background task's warnings and errors. Defaults
// to slog.Default().
func (b *Builder) Logger(l *slog.Logger) *Builder { b.cfg.Logger = l; return b }

// Queue registers a queue with a fixed partition count (1..4096; fixed at
// first registration, in every process) and its handler, from
// processor.Leased, Transactional, their batch forms or processor.JSON. A
// nil handler registers the queue for enqueueing only: this process
// enqueues, others consume. Options given here override QueueDefaults.
func (b *Builder) Queue(name string, partitions int, h processor.Handler, opts ...processor.QueueOption) *Builder {
	b.checkOptions(fmt.Sprintf("Queue(%s)", name), opts)
	b.queues = append(b.queues, queueDecl{name: name, partitions: partitions, handler: h, opts: opts})
	return b
}

// QueueDefaults sets options every queue gets before its own (middleware
// such as the otel module's, say). A default that does not apply to a
// queue (a Lease on a transactional queue) is left out for that queue.
func (b *Builder) QueueDefaults(opts ...processor.QueueOption) *Builder {
	b.checkOptions("QueueDefaults", opts)
	b.queueDefaults = append(b.queueDefaults, opts...)
	return b
}

func (b *Builder) checkOptions(field string, opts []processor.QueueOption) {
	for i, opt := range opts {
		if opt == nil {
			b.errs = append(b.errs, configerr.New(fmt.Sprintf("%s.options[%d]", field, i), "nil option"))
		}
	}
}

// EnqueueHeaders adds the headers fn returns to every message enqueued
// that does not set them itself; fn is called once per Enqueue call with
// its context and queue (trace context: the otel module). A panic in fn
// costs the enqueue its headers, not the enqueue. Defaults to none.
func (b *Builder) EnqueueHeaders(fn func(ctx context.Context, queue string) map[string]string) *Builder {
	b.cfg.EnqueueHeaders = fn
	return b
}

// MaxPayloadBytes bounds one message's payload plus headers plus key.
// Defaults to MaxPayloadBytesDefault (64 KiB); at most what one statement
// can carry on the database.
func (b *Builder) MaxPayloadBytes(n int) *Builder { b.cfg.MaxPayloadBytes = n; return b }

// EnqueueChunk bounds one multi-row INSERT of an enqueue, by rows and by
// the bytes of its SQL text. Defaults to EnqueueChunkRowsDefault (1000)
// and EnqueueChunkBytesDefault (4 MiB).
func (b *Builder) EnqueueChunk(rows, bytes int) *Builder {
	b.cfg.EnqueueChunkRows, b.cfg.EnqueueChunkBytes = rows, bytes
	return b
}

// MaybeDirtyWindow is how long a partition enqueued to through a
// transaction seqbox does not own is re-checked for its rows, waiting for
// the caller's commit. Defaults to MaybeDirtyWindowDefault (1s).
func (b *Builder) MaybeDirtyWindow(d time.Duration) *Builder { b.cfg.MaybeDirtyWindow = d; return b }

// ProducerOnly makes this process only enqueue: it runs no sequencer,
// processor or vacuum, and no queue may have a handler; other processes
// sharing the database do the work. Defaults to false.
func (b *Builder) ProducerOnly() *Builder { b.cfg.ProducerOnly = true; return b }

// NoWakeups turns off listening for other processes' commits (PostgreSQL
// LISTEN/NOTIFY; docs/ARCHITECTURE.md, "Wake-ups across processes"): their
// work is then found by polling (ReconcileInterval, PollInterval).
// Defaults to listening where the dialect can.
func (b *Builder) NoWakeups() *Builder { b.cfg.NoWakeups = true; return b }

// PostgresOptions passes opts to the PostgreSQL dialect. Wake-ups across
// processes need a listener the application provides, so that seqbox
// links no driver: postgres.WithListener(pgxlisten.New(dsn)) or
// postgres.WithListener(pgdriverlisten.New(db)), from the module
// github.com/seqbox/seqbox/pglisten. On another database it is a
// configuration error. Defaults to none: other processes' work is found by
// polling (ReconcileInterval, PollInterval).
func (b *Builder) PostgresOptions(opts ...postgres.Option) *Builder {
	b.pgOpts = append(b.pgOpts, opts...)
	return b
}

// ProcessorConcurrency bounds the handler calls running at once in this
// process, across queues. Defaults to ProcessorConcurrencyDefault (8).
func (b *Builder) ProcessorConcurrency(n int) *Builder { b.cfg.Processor.Concurrency = n; return b }

// PollInterval sets how often processors look for work no signal
// announced (sequenced by another process, retry times, expired leases).
// Defaults to PollIntervalDefault (1s).
func (b *Builder) PollInterval(d time.Duration) *Builder { b.cfg.Processor.PollInterval = d; return b }

// InstanceID names this process in lease rows (printable ASCII, 1..128
// bytes). Defaults to host-pid-random.
func (b *Builder) InstanceID(id string) *Builder { b.cfg.Processor.Owner = id; return b }

// SequencerWorkers sets how many moves run at once, each of up to
// SequencerMovePartitions waiting partitions. Defaults to the database's
// measured best: 2 on PostgreSQL and MySQL/MariaDB, 1 on SQLite.
func (b *Builder) SequencerWorkers(n int) *Builder { b.cfg.Sequencer.Workers = n; return b }

// SequencerBatchSize sets the rows moved per sequencer transaction
// (1..10000). Defaults to SequencerBatchSizeDefault (1000).
func (b *Builder) SequencerBatchSize(n int) *Builder { b.cfg.Sequencer.BatchSize = n; return b }

// SequencerMaxIterations sets how many full batches a sequencer worker
// moves from one partition before it lets others go first. Defaults to
// SequencerMaxIterationsDefault (4).
func (b *Builder) SequencerMaxIterations(n int) *Builder {
	b.cfg.Sequencer.MaxInnerIterations = n
	return b
}

// SequencerMovePartitions sets the most partitions one sequencer
// transaction moves when several wait (1..1024; 1 moves one at a time).
// Defaults to SequencerMovePartitionsDefault (32).
func (b *Builder) SequencerMovePartitions(n int) *Builder {
	b.cfg.Sequencer.MovePartitions = n
	return b
}

// ReconcileInterval sets the period of the scan for rows no signal
// announced (other processes, lost signals). Defaults to
// ReconcileIntervalDefault (1s).
func (b *Builder) ReconcileInterval(d time.Duration) *Builder {
	b.cfg.Sequencer.ReconcileInterval = d
	return b
}

// VacuumInterval sets the pause between sweeps that prune acked rows.
// Defaults to VacuumIntervalDefault (1s).
func (b *Builder) VacuumInterval(d time.Duration) *Builder { b.cfg.Vacuum.Interval = d; return b }

// VacuumChunk sets the most messages pruned per vacuum transaction.
// Defaults to VacuumChunkDefault (5000).
func (b *Builder) VacuumChunk(n int) *Builder { b.cfg.Vacuum.Chunk = n; return b }

// TableVacuumInterval sets how often seqbox VACUUMs its own tables on
// PostgreSQL when autovacuum is off (elsewhere it does nothing); negative:
// never. Defaults to TableVacuumIntervalDefault (30s).
func (b *Builder) TableVacuumInterval(d time.Duration) *Builder {
	b.cfg.Vacuum.TableInterval = d
	return b
}

// RotateInterval sets how old the current generation of the message tables
// gets before new messages go to the next one; a generation whose every
// message is acked is truncated whole instead of pruned row by row
// (docs/ROTATION.md; on every database). At least 10ms; negative: this process never rotates, and prunes row by row.
// Defaults to RotateIntervalDefault (30s, the value measured in
// docs/ROTATION.md).
func (b *Builder) RotateInterval(d time.Duration) *Builder {
	b.cfg.Vacuum.RotateInterval = d
	return b
}

// RotateSize sets how many bytes the current generation's tables (body and
// outgoing, indexes included) take before new messages go to the next one
// (see RotateInterval; on SQLite an estimate, docs/ROTATION.md). At least
// 1 MiB; negative: never by size. Defaults to RotateSizeDefault (256 MiB).
func (b *Builder) RotateSize(bytes int64) *Builder {
	b.cfg.Vacuum.RotateSize = bytes
	return b
}

// Start validates the configuration (every mistake at once), migrates if
// asked, registers the queues (all or none; another partition count for a
// registered queue is a *PartitionCountError) and starts the background
// tasks, which outlive ctx: end them with Outbox.Stop. Migration and
// registration retry transient database errors until ctx ends.
func (b *Builder) Start(ctx context.Context) (*Outbox, error) {
	errs := append([]error(nil), b.errs...)
	if b.db == nil {
		return nil, errors.Join(append(errs, configerr.New("New", "nil *bun.DB"))...)
	}
	if len(b.pgOpts) > 0 && b.db.Dialect().Name() != bundialect.PG {
		errs = append(errs, configerr.New("PostgresOptions", "the database is %s, not PostgreSQL", b.db.Dialect().Name()))
	}
	// Some dialects read the server's settings (MySQL's version): a server
	// still starting is waited for, as Start's later steps are.
	var d dialect.Dialect
	err := lifecycle.Retry(ctx, cmp.Or(b.cfg.Logger, slog.Default()), "connect", lifecycle.IsTransient, func() (err error) {
		d, err = dialects.Open(ctx, b.db, b.prefix, b.pgOpts...)
		return err
	})
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	cfg := b.cfg
	defaults := options(b.queueDefaults)
	for _, q := range b.queues {
		var h handling.Handler
		if q.handler != nil {
			h = q.handler.(handling.Handler) // every processor.Handler is one
		}
		own := options(q.opts)
		cfg.Queues = append(cfg.Queues, engine.QueueConfig{
			Name: q.name, Partitions: q.partitions, Handler: h,
			Options: handling.Resolve(defaults, own), OptionValues: append(append([]handling.Option(nil), defaults...), own...),
		})
	}
	if len(errs) > 0 {
		// Report the builder's own findings with the configuration's.
		if verr := engine.ValidateOnly(d, cfg); verr != nil {
			errs = append(errs, verr)
		}
		return nil, errors.Join(errs...)
	}
	e, err := engine.Start(ctx, d, cfg)
	if err != nil {
		return nil, err
	}
	engine.Captured(ctx, e)
	return &Outbox{e: e}, nil
}

func options(opts []processor.QueueOption) []handling.Option {
	out := make([]handling.Option, 0, len(opts))
	for _, o := range opts {
		if o != nil {
			out = append(out, o.(handling.Option)) // every processor.QueueOption is one
		}
	}
	return out
}
