package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/internal/lifecycle"
)

// GroupLeaser is an optional fast path of a Store, found by type
// assertion: the leases, and the clean acks with their next leases, of
// several partitions in one transaction each. With many lightly loaded
// partitions every batch is a message or two, and a commit per partition
// is what costs (a log flush each on MySQL/MariaDB). The pool folds the
// requests of partitions that arrive while one statement runs into the
// next (see coalescer), so a lone request never waits for company.
type GroupLeaser interface {
	ProcessorLeaseGroup(ctx context.Context, params *dialect.ProcessorLeaseGroupParams) ([]dialect.ProcessorLeaseResult, error)
	ProcessorAckLeaseGroup(ctx context.Context, params *dialect.ProcessorAckLeaseGroupParams) ([]dialect.ProcessorGroupResult, error)
}

// groupMax bounds a group: its transaction holds that many row locks.
const groupMax = 64

// groupStepsPerSlot is how many partitions per handler slot may be between
// a lease and its ack when leases are grouped: enough that a slot never
// waits for a round trip and that each grouped statement carries many
// partitions, few enough that a process does not lease far more than it
// can work (another process could have worked those partitions). 8, not
// 4: at 1,024 partitions the backlog a process settles at fell by a third
// on MariaDB and PostgreSQL, its p99 by 40% (BENCHMARKS.md, "Eight
// partitions in flight per handler slot").
const groupStepsPerSlot = 8

// coalescer is group commit for one kind of request: one call runs at a
// time, and the calls that arrive meanwhile are run together by the next
// one, whose caller leads it. A group that fails as a whole is retried by
// each of its callers alone, so one bad item costs no more than it did
// before grouping.
type coalescer[Req, Res any] struct {
	one  func(ctx context.Context, req Req) (Res, error)
	many func(ctx context.Context, reqs []Req) ([]dialect.ProcessorGroupResult, error)
	// result turns a group item into this kind's result.
	result func(dialect.ProcessorGroupResult) Res

	mu      sync.Mutex
	queue   []*groupCall[Req, Res]
	running bool
}

type groupCall[Req, Res any] struct {
	req  Req
	res  Res
	err  error
	wake chan bool // true: lead the next group; false: res and err are set
}

// do runs req, alone or in a group.
func (c *coalescer[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	call := &groupCall[Req, Res]{req: req, wake: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, call)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if !lead && !<-call.wake {
		return call.res, call.err
	}
	// Leading: this call is at the head of the queue.
	c.mu.Lock()
	n := min(len(c.queue), groupMax)
	group := c.queue[:n:n]
	c.queue = c.queue[n:]
	c.mu.Unlock()

	c.run(ctx, group)

	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].wake <- true // the next group's leader
	} else {
		c.running = false
	}
	c.mu.Unlock()
	for _, g := range group[1:] {
		g.wake <- false
	}
	return call.res, call.err
}

// errRunAlone marks the items of a failed group: each caller runs its own.
var errRunAlone = fmt.Errorf("seqbox: group failed; run alone")

func (c *coalescer[Req, Res]) run(ctx context.Context, group []*groupCall[Req, Res]) {
	if len(group) == 1 {
		g := group[0]
		g.err = lifecycle.Safely(func() (err error) { g.res, err = c.one(ctx, g.req); return err })
		return
	}
	reqs := make([]Req, len(group))
	for i, g := range group {
		reqs[i] = g.req
	}
	var items []dialect.ProcessorGroupResult
	err := lifecycle.Safely(func() (err error) { items, err = c.many(ctx, reqs); return err })
	if err == nil && len(items) != len(group) {
		err = fmt.Errorf("seqbox: %d results for a group of %d", len(items), len(group))
	}
	for i, g := range group {
		if err != nil {
			g.err = errRunAlone
			continue
		}
		g.res, g.err = c.result(items[i]), items[i].Err
	}
	if err != nil && ctx.Err() != nil {
		for _, g := range group {
			g.err = err // shutting down: nothing to retry
		}
	}
}

// runAlone is do, then the single call when the group failed as a whole.
func (c *coalescer[Req, Res]) runAlone(ctx context.Context, req Req) (Res, error) {
	res, err := c.do(ctx, req)
	if err == errRunAlone {
		return c.one(ctx, req)
	}
	return res, err
}

// groups are the pool's two coalescers, when the store has GroupLeaser.
type groups struct {
	leases *coalescer[*dialect.ProcessorLeaseParams, dialect.ProcessorLeaseResult]
	acks   *coalescer[*dialect.ProcessorAckLeaseParams, dialect.ProcessorLeaseResult]
}

func newGroups(d PoolStore, gl GroupLeaser) *groups {
	leaseResult := func(r dialect.ProcessorGroupResult) dialect.ProcessorLeaseResult { return r.Lease }
	return &groups{
		leases: &coalescer[*dialect.ProcessorLeaseParams, dialect.ProcessorLeaseResult]{
			one: d.ProcessorLease,
			many: func(ctx context.Context, reqs []*dialect.ProcessorLeaseParams) ([]dialect.ProcessorGroupResult, error) {
				params := &dialect.ProcessorLeaseGroupParams{Leases: make([]dialect.ProcessorLeaseParams, len(reqs))}
				for i, r := range reqs {
					params.Leases[i] = *r
				}
				leases, err := gl.ProcessorLeaseGroup(ctx, params)
				out := make([]dialect.ProcessorGroupResult, len(leases))
				for i, l := range leases {
					out[i].Lease = l
				}
				return out, err
			},
			result: leaseResult,
		},
		acks: &coalescer[*dialect.ProcessorAckLeaseParams, dialect.ProcessorLeaseResult]{
			one: func(ctx context.Context, req *dialect.ProcessorAckLeaseParams) (dialect.ProcessorLeaseResult, error) {
				return ackLeaseOne(ctx, d, req)
			},
			many: func(ctx context.Context, reqs []*dialect.ProcessorAckLeaseParams) ([]dialect.ProcessorGroupResult, error) {
				params := &dialect.ProcessorAckLeaseGroupParams{Items: make([]dialect.ProcessorAckLeaseParams, len(reqs))}
				for i, r := range reqs {
					params.Items[i] = *r
				}
				return gl.ProcessorAckLeaseGroup(ctx, params)
			},
			result: leaseResult,
		},
	}
}
