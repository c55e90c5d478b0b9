// The outbox's configuration as the Builder collects it: defaults,
// validation, and the queues to register.

package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/configerr"
	"github.com/seqbox/seqbox/internal/handling"
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
	// Partitions is fixed at first registration (1..outbox.MaxPartitions).
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

// ValidateOnly reports cfg's mistakes without starting anything (the
// Builder joins them with its own).
func ValidateOnly(d dialect.Dialect, cfg Config) error {
	return errors.Join(cfg.WithDefaults(d).Validate(d)...)
}
