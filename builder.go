// Package seqbox is a transactional outbox with strict per-partition order
// for PostgreSQL, MySQL/MariaDB and SQLite, on bun.
//
// Applications enqueue messages in the same SQL transaction as their
// business writes; seqbox delivers every committed message to its queue's
// handler at least once (exactly once for database effects in
// transactional mode), in enqueue order within a partition, with
// partitions worked in parallel across any number of processes sharing one
// database. Build an outbox with New(db)...Start(ctx).
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
	"github.com/uptrace/bun/migrate"

	"github.com/seqbox/seqbox/deadletter"
	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/mysql"
	"github.com/seqbox/seqbox/dialect/postgres"
	"github.com/seqbox/seqbox/dialect/sqlite"
	"github.com/seqbox/seqbox/internal/lifecycle"
	"github.com/seqbox/seqbox/outbox"
	"github.com/seqbox/seqbox/processor"
)

// Outbox is the running outbox handle.
type Outbox = outbox.Outbox

// Config is the plain configuration a Builder produces.
type Config = outbox.Config

// Errors, re-exported from outbox: match them with errors.Is.
var (
	ErrInvalidQueueName       = outbox.ErrInvalidQueueName
	ErrInvalidPayloadType     = outbox.ErrInvalidPayloadType
	ErrPayloadTooLarge        = outbox.ErrPayloadTooLarge
	ErrPartitionOutOfRange    = outbox.ErrPartitionOutOfRange
	ErrQueueNotRegistered     = outbox.ErrQueueNotRegistered
	ErrEmptyBatch             = outbox.ErrEmptyBatch
	ErrPartitionCountMismatch = outbox.ErrPartitionCountMismatch
	ErrInvalidConfig          = outbox.ErrInvalidConfig
)

// Builder collects the configuration fluently; Start validates it. Methods
// never panic: a bad value is reported by Start.
type Builder struct {
	db            *bun.DB
	prefix        string
	cfg           outbox.Config
	queueDefaults []processor.QueueOption
	queues        []queueDecl
	// errs are misuses found while building (a nil option, say), reported
	// by Start rather than by a panic.
	errs []error
}

type queueDecl struct {
	name       string
	partitions int
	handler    *processor.Handler
	opts       []processor.QueueOption
}

// New starts a builder for db (any bun dialect: pg, mysql, sqlite).
func New(db *bun.DB) *Builder {
	return &Builder{db: db, prefix: dialect.DefaultPrefix}
}

// TablePrefix sets the table prefix ([a-z_][a-z0-9_]*, up to 32). Defaults to "seqbox_".
func (b *Builder) TablePrefix(prefix string) *Builder { b.prefix = prefix; return b }

// Migrate creates or upgrades the schema in Start. Defaults to false.
func (b *Builder) Migrate(on bool) *Builder { b.cfg.Migrate = on; return b }

// Logger sets the logger of every task. Defaults to slog.Default().
func (b *Builder) Logger(l *slog.Logger) *Builder { b.cfg.Logger = l; return b }

// EnqueueHeaders adds the headers fn returns to every enqueued message that
// does not set them itself (Config.EnqueueHeaders): trace context, say.
func (b *Builder) EnqueueHeaders(fn func(ctx context.Context, queue string) map[string]string) *Builder {
	b.cfg.EnqueueHeaders = fn
	return b
}

// Queue registers a queue with a fixed partition count (1..1024) and its
// handler; a nil handler registers it for enqueueing only.
func (b *Builder) Queue(name string, partitions int, h *processor.Handler, opts ...processor.QueueOption) *Builder {
	b.checkOptions("Queues["+name+"].Options", opts)
	b.queues = append(b.queues, queueDecl{name: name, partitions: partitions, handler: h, opts: opts})
	return b
}

// QueueDefaults sets options applied to every queue before its own.
func (b *Builder) QueueDefaults(opts ...processor.QueueOption) *Builder {
	b.checkOptions("QueueDefaults", opts)
	b.queueDefaults = append(b.queueDefaults, opts...)
	return b
}

func (b *Builder) checkOptions(field string, opts []processor.QueueOption) {
	for i, opt := range opts {
		if opt == nil {
			b.errs = append(b.errs, &outbox.ConfigError{Field: fmt.Sprintf("%s[%d]", field, i), Reason: "nil option"})
		}
	}
}

// ProcessorConcurrency bounds handler calls at once (processor.Config.Concurrency). Defaults to 8.
func (b *Builder) ProcessorConcurrency(n int) *Builder { b.cfg.Processor.Concurrency = n; return b }

// PollInterval sets how often processors look for work from other processes. Defaults to 1s.
func (b *Builder) PollInterval(d time.Duration) *Builder { b.cfg.Processor.PollInterval = d; return b }

// SequencerWorkers sets the partitions sequenced at once. Defaults to 4 on
// PostgreSQL, 2 on MySQL/MariaDB and 1 on SQLite (dialect.Tuning).
func (b *Builder) SequencerWorkers(n int) *Builder { b.cfg.Sequencer.Workers = n; return b }

// SequencerBatchSize sets rows moved per sequencer transaction. Defaults to 1000.
func (b *Builder) SequencerBatchSize(n int) *Builder { b.cfg.Sequencer.BatchSize = n; return b }

// ReconcileInterval sets the incoming-table scan period. Defaults to 1s.
func (b *Builder) ReconcileInterval(d time.Duration) *Builder {
	b.cfg.Sequencer.ReconcileInterval = d
	return b
}

// VacuumInterval sets the pause between vacuum sweeps. Defaults to 1s.
func (b *Builder) VacuumInterval(d time.Duration) *Builder { b.cfg.Vacuum.Interval = d; return b }

// VacuumChunk sets messages pruned per vacuum transaction. Defaults to 5000.
func (b *Builder) VacuumChunk(n int) *Builder { b.cfg.Vacuum.Chunk = n; return b }

// MaxPayloadBytes bounds payload plus headers of a message. Defaults to 64 KiB.
func (b *Builder) MaxPayloadBytes(n int) *Builder { b.cfg.MaxPayloadBytes = n; return b }

// ProducerOnly makes this process only enqueue: it runs no sequencer,
// processor or vacuum; other processes sharing the database do, and find
// its rows with their reconciler scan. Defaults to false.
func (b *Builder) ProducerOnly() *Builder { b.cfg.ProducerOnly = true; return b }

// InstanceID names this process in lease rows. Defaults to host-pid-random.
func (b *Builder) InstanceID(id string) *Builder { b.cfg.Processor.Owner = id; return b }

// Configure edits the plain Config directly, for settings without a
// method. Queues it adds to Config.Queues are registered with those of
// Queue, after them.
func (b *Builder) Configure(fn func(*Config)) *Builder {
	if fn == nil {
		b.errs = append(b.errs, &outbox.ConfigError{Field: "Configure", Reason: "nil function"})
		return b
	}
	fn(&b.cfg)
	return b
}

// Config returns the configuration the builder has collected, defaults
// filled, except Sequencer.Workers, which stays 0 unless set: Start picks
// the database's default then (dialect.Tuning). Every call returns the same
// instance id.
func (b *Builder) Config() Config {
	if b.cfg.Processor.Owner == "" {
		b.cfg.Processor.Owner = processor.DefaultOwner()
	}
	cfg := b.cfg
	cfg.Queues = nil
	for _, q := range b.queues {
		opts := append(append([]processor.QueueOption(nil), b.queueDefaults...), q.opts...)
		cfg.Queues = append(cfg.Queues, outbox.QueueConfig{
			Name: q.name, Partitions: q.partitions, Handler: q.handler, Options: processor.NewQueueOptions(opts...),
		})
	}
	cfg.Queues = append(cfg.Queues, b.cfg.Queues...)
	cfg = cfg.WithDefaults()
	cfg.Sequencer.Workers = b.cfg.Sequencer.Workers
	return cfg
}

// Start validates the configuration, migrates if asked, registers the
// queues (idempotent; another partition count for an existing queue is an
// ErrPartitionCountMismatch) and starts the background tasks.
func (b *Builder) Start(ctx context.Context) (*Outbox, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if b.db == nil {
		return nil, &outbox.ConfigError{Field: "db", Reason: "nil *bun.DB"}
	}
	// Some dialects read the server's settings (MySQL's version): a server
	// still starting is waited for, as in outbox.Start's own steps.
	var d dialect.Dialect
	err := lifecycle.Retry(ctx, cmp.Or(b.cfg.Logger, slog.Default()), "connect", lifecycle.IsTransient, func() (err error) {
		d, err = Dialect(ctx, b.db, b.prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return outbox.Start(ctx, d, b.Config())
}

// Dialect picks the seqbox dialect for db's bun dialect.
func Dialect(ctx context.Context, db *bun.DB, prefix string) (dialect.Dialect, error) {
	if err := dialect.ValidatePrefix(prefix); err != nil {
		return nil, &outbox.ConfigError{Field: "TablePrefix", Reason: err.Error()}
	}
	switch name := db.Dialect().Name(); name {
	case bundialect.PG:
		return postgres.New(db, prefix)
	case bundialect.MySQL:
		return mysql.New(ctx, db, prefix)
	case bundialect.SQLite:
		return sqlite.New(db, prefix)
	default:
		return nil, &outbox.ConfigError{Field: "db", Reason: fmt.Sprintf("unsupported bun dialect %s (want pg, mysql or sqlite)", name)}
	}
}

// DeadLetters returns the dead-letter admin for a database and table
// prefix, without starting a pipeline (a CLI, an admin service). The
// schema must exist. An application with a running Outbox uses its
// DeadLetters method instead, whose replays its sequencer picks up at once.
func DeadLetters(ctx context.Context, db *bun.DB, prefix string) (*deadletter.Admin, error) {
	d, err := Dialect(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return deadletter.NewAdmin(d, nil), nil
}

// Partitions returns the admin of parked partitions for a database and
// table prefix, without starting a pipeline (a CLI, an admin service). The
// processes working a resumed or skipped partition pick it up at their
// next poll.
func Partitions(ctx context.Context, db *bun.DB, prefix string) (*processor.Admin, error) {
	d, err := Dialect(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return processor.NewAdmin(d, nil), nil
}

// Purge removes a queue's undelivered messages whose headers match f,
// without a running outbox (the CLI's purge); see outbox.Purge.
func Purge(ctx context.Context, db *bun.DB, prefix, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	d, err := Dialect(ctx, db, prefix)
	if err != nil {
		return outbox.PurgeResult{}, err
	}
	return outbox.Purge(ctx, d, queue, f)
}

// PreviewPurge counts what Purge would remove now, changing nothing.
func PreviewPurge(ctx context.Context, db *bun.DB, prefix, queue string, f outbox.PurgeFilter) (outbox.PurgeResult, error) {
	d, err := Dialect(ctx, db, prefix)
	if err != nil {
		return outbox.PurgeResult{}, err
	}
	return outbox.PreviewPurge(ctx, d, queue, f)
}

// Stats reads every partition's backlog and dead letters for a database
// and table prefix, without starting a pipeline (the CLI's status).
func Stats(ctx context.Context, db *bun.DB, prefix string) ([]outbox.PartitionStats, error) {
	d, err := Dialect(ctx, db, prefix)
	if err != nil {
		return nil, err
	}
	return outbox.ReadStats(ctx, d)
}

// Migrations returns the seqbox schema as bun/migrate migrations, for
// applications that run their schema changes with bun/migrate instead of
// Migrate(true). Each seqbox schema change adds one entry; every entry
// brings the schema fully up to date under seqbox's own database lock, so
// an application that ran an older list picks up the new entries.
func Migrations(prefix string) *migrate.Migrations {
	up := func(ctx context.Context, m *migrate.Migrator, _ *migrate.Migration) error {
		d, err := Dialect(ctx, m.DB(), prefix)
		if err != nil {
			return err
		}
		return d.SchemaMigrate(ctx, &dialect.SchemaMigrateParams{})
	}
	ms := migrate.NewMigrations()
	ms.Add(migrate.Migration{
		Name: "20261121000001", Comment: "seqbox_schema_v1", Up: up,
		Down: func(ctx context.Context, m *migrate.Migrator, _ *migrate.Migration) error {
			d, err := Dialect(ctx, m.DB(), prefix)
			if err != nil {
				return err
			}
			return d.SchemaDrop(ctx, &dialect.SchemaDropParams{})
		},
	})
	// Later schema changes: each entry brings the schema up to date; rolling
	// one back keeps it (the v1 entry's Down drops the tables).
	keep := func(context.Context, *migrate.Migrator, *migrate.Migration) error { return nil }
	for _, e := range []struct{ name, comment string }{
		{"20261122000001", "seqbox_schema_utf8mb4_text"},
		{"20261122000002", "seqbox_schema_flat_cost"},
		{"20261123000001", "seqbox_schema_dead_letter_actions"},
		{"20261123000002", "seqbox_schema_vacuum_truncate_all"},
		{"20261123000003", "seqbox_schema_processor_park"},
		{"20261123000004", "seqbox_schema_message_key"},
		{"20261123000005", "seqbox_schema_dedup_keys"},
		{"20261123000006", "seqbox_schema_purge"},
	} {
		ms.Add(migrate.Migration{Name: e.name, Comment: e.comment, Up: up, Down: keep})
	}
	return ms
}
