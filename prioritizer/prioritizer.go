package prioritizer

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Defaults applied by Config.WithDefaults to fields left at zero.
const (
	ErrorBackoffBaseDefault = 100 * time.Millisecond
	ErrorBackoffMaxDefault  = 30 * time.Second
	SkipDelayDefault        = 2 * time.Millisecond
	ProbeWindowDefault      = time.Second
	ProbeDelayMinDefault    = time.Millisecond
	ProbeDelayMaxDefault    = 100 * time.Millisecond
)

// Config tunes the delays of a Prioritizer. The zero value is usable: New
// applies WithDefaults.
type Config struct {
	// ErrorBackoffBase is the first delay after Failed; it doubles per
	// consecutive failure. Defaults to ErrorBackoffBaseDefault.
	ErrorBackoffBase time.Duration
	// ErrorBackoffMax caps the error backoff. Defaults to ErrorBackoffMaxDefault.
	ErrorBackoffMax time.Duration
	// SkipDelay is how long a Skipped partition waits before it is offered
	// again (another instance holds its lock). Defaults to SkipDelayDefault.
	SkipDelay time.Duration
	// ProbeWindow is how long after MarkMaybeDirty the partition keeps being
	// re-checked. Defaults to ProbeWindowDefault.
	ProbeWindow time.Duration
	// ProbeDelayMin is the first re-check delay after an empty probe.
	// Defaults to ProbeDelayMinDefault.
	ProbeDelayMin time.Duration
	// ProbeDelayMax caps the doubling re-check delay. Defaults to
	// ProbeDelayMaxDefault.
	ProbeDelayMax time.Duration
	// Now is the clock deciding readiness; nil means time.Now. Tests inject a
	// fake clock and use TryTake, because Take sleeps in real time.
	Now func() time.Time
}

// WithDefaults returns c with every unset field replaced by its default.
// Negative durations count as unset too: they would make the doubling
// arithmetic meaningless.
func (c Config) WithDefaults() Config {
	c.ErrorBackoffBase = positiveOr(c.ErrorBackoffBase, ErrorBackoffBaseDefault)
	c.ErrorBackoffMax = positiveOr(c.ErrorBackoffMax, ErrorBackoffMaxDefault)
	c.SkipDelay = positiveOr(c.SkipDelay, SkipDelayDefault)
	c.ProbeWindow = positiveOr(c.ProbeWindow, ProbeWindowDefault)
	c.ProbeDelayMin = positiveOr(c.ProbeDelayMin, ProbeDelayMinDefault)
	c.ProbeDelayMax = positiveOr(c.ProbeDelayMax, ProbeDelayMaxDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func positiveOr(value, fallback time.Duration) time.Duration {
	if value > 0 {
		return value
	}
	return fallback
}

// Stats is a snapshot of how many partitions are in each non-idle state.
type Stats struct {
	Pending int // pending-ready: can be taken now
	Delayed int // pending-delayed: waiting for backoff, skip delay or probe delay
	Claimed int // held by a worker
}

type partitionState uint8

const (
	stateReady partitionState = iota
	stateDelayed
	stateClaimed
)

// delayReason matters because marks cut only probe delays short: an error
// backoff or a skip delay exists for a reason a new row does not remove.
type delayReason uint8

const (
	delayNone delayReason = iota
	delayProbe
	delaySkip
	delayBackoff
)

const notInHeap = -1

// partition is the scheduling state of one non-idle partition. All fields
// except id are guarded by Prioritizer.mu.
type partition struct {
	id    int64
	state partitionState

	// dirtySince is the priority: the oldest ready partition is served first.
	dirtySince time.Time

	// readyAt and delayReason are meaningful only in stateDelayed.
	readyAt     time.Time
	delayReason delayReason

	// redirtied records a mark that arrived while claimed, so the worker's
	// outcome cannot drop it.
	redirtied bool

	// probeUntil ends the window opened by MarkMaybeDirty; nextProbeDelay is
	// the wait before the next re-check after a Done outside of it.
	probeUntil     time.Time
	nextProbeDelay time.Duration

	consecutiveFailures int

	readyIndex   int
	delayedIndex int
}

// Prioritizer is an in-memory scheduler of dirty partitions. Create it with
// New; it is safe for concurrent use.
type Prioritizer struct {
	cfg Config

	mu         sync.Mutex
	partitions map[int64]*partition // every non-idle partition
	ready      readyQueue
	delayed    delayedQueue
	claimed    int

	// changed is closed (and forgotten) on every state change, waking all
	// blocked Take calls so they re-check. It is created lazily by a waiter,
	// so changes cost nothing while no one waits. A waiter obtains it under
	// mu in the same critical section in which it found no work, so no change
	// can slip between the check and the wait.
	changed chan struct{}
}

// New returns an empty Prioritizer using cfg with defaults applied.
func New(cfg Config) *Prioritizer {
	return &Prioritizer{
		cfg:        cfg.WithDefaults(),
		partitions: make(map[int64]*partition),
	}
}

// MarkDirty records that rows were committed to the partition.
func (p *Prioritizer) MarkDirty(partitionID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.markLocked(partitionID, p.cfg.Now(), false)
}

// MarkMaybeDirty records that rows may appear in the partition soon (they were
// written in a transaction that has not committed yet). Besides acting like
// MarkDirty, it keeps the partition being re-checked for ProbeWindow, because
// the commit itself may never be signalled.
func (p *Prioritizer) MarkMaybeDirty(partitionID int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.markLocked(partitionID, p.cfg.Now(), true)
}

func (p *Prioritizer) markLocked(partitionID int64, now time.Time, maybe bool) {
	entry, known := p.partitions[partitionID]
	if !known {
		entry = &partition{
			id:             partitionID,
			dirtySince:     now,
			nextProbeDelay: p.cfg.ProbeDelayMin,
			readyIndex:     notInHeap,
			delayedIndex:   notInHeap,
		}
		p.partitions[partitionID] = entry
		if maybe {
			entry.probeUntil = now.Add(p.cfg.ProbeWindow)
		}
		p.pushReadyLocked(entry)
		p.broadcastLocked()
		return
	}

	if maybe {
		if until := now.Add(p.cfg.ProbeWindow); until.After(entry.probeUntil) {
			entry.probeUntil = until
		}
	}

	switch entry.state {
	case stateClaimed:
		entry.redirtied = true
	case stateReady:
		if now.Before(entry.dirtySince) {
			entry.dirtySince = now
			heap.Fix(&p.ready, entry.readyIndex)
		}
	case stateDelayed:
		if now.Before(entry.dirtySince) {
			entry.dirtySince = now
		}
		if entry.delayReason == delayProbe {
			// A probe delay only guesses when rows may show up; a mark says
			// they did, so waiting any longer would just add latency.
			heap.Remove(&p.delayed, entry.delayedIndex)
			p.pushReadyLocked(entry)
			p.broadcastLocked()
		}
	}
}

// Flush makes every partition waiting on a probe delay ready now. It does not
// shorten error backoffs or skip delays.
func (p *Prioritizer) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()

	var probing []*partition
	for _, entry := range p.delayed {
		if entry.delayReason == delayProbe {
			probing = append(probing, entry)
		}
	}
	if len(probing) == 0 {
		return
	}
	for _, entry := range probing {
		heap.Remove(&p.delayed, entry.delayedIndex)
		if now.Before(entry.dirtySince) {
			entry.dirtySince = now
		}
		p.pushReadyLocked(entry)
	}
	p.broadcastLocked()
}

// Take blocks until a partition is ready and claims it for the caller, or
// returns ctx.Err() once ctx is done. An already-done ctx wins over ready
// work, so a shutting-down worker does not start another batch.
func (p *Prioritizer) Take(ctx context.Context) (*Claim, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}

		p.mu.Lock()
		now := p.cfg.Now()
		claim := p.takeLocked(now)
		var changed chan struct{}
		var untilNextDelayed time.Duration
		hasDelayed := false
		if claim == nil {
			if p.changed == nil {
				p.changed = make(chan struct{})
			}
			changed = p.changed
			if len(p.delayed) > 0 {
				hasDelayed = true
				untilNextDelayed = p.delayed[0].readyAt.Sub(now)
			}
		}
		p.mu.Unlock()

		if claim != nil {
			return claim, nil
		}
		if err := p.wait(ctx, changed, hasDelayed, untilNextDelayed); err != nil {
			return nil, err
		}
	}
}

// wait sleeps until a state change, the earliest delayed entry falling due, or
// ctx ending. The delay is measured on the real clock even when cfg.Now is a
// fake: the timer only triggers a re-check, so that is harmless.
func (p *Prioritizer) wait(ctx context.Context, changed <-chan struct{}, hasDelayed bool, untilNextDelayed time.Duration) error {
	var timerC <-chan time.Time
	if hasDelayed {
		timer := time.NewTimer(max(untilNextDelayed, 0))
		defer timer.Stop()
		timerC = timer.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timerC:
	}
	return nil
}

// TryTake claims the highest-priority ready partition, or returns nil if none
// is ready now.
func (p *Prioritizer) TryTake() *Claim {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(p.cfg.Now())
}

// Stats returns the current number of partitions per state.
func (p *Prioritizer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Promote first so the counts reflect the clock, not when someone last
	// called Take.
	p.promoteDueLocked(p.cfg.Now())
	return Stats{Pending: len(p.ready), Delayed: len(p.delayed), Claimed: p.claimed}
}

func (p *Prioritizer) takeLocked(now time.Time) *Claim {
	p.promoteDueLocked(now)
	if len(p.ready) == 0 {
		return nil
	}
	entry := heap.Pop(&p.ready).(*partition)
	entry.state = stateClaimed
	entry.redirtied = false
	p.claimed++
	return &Claim{prioritizer: p, entry: entry}
}

// promoteDueLocked moves delayed partitions whose time has come to the ready
// queue. Doing it lazily on read keeps the data structure free of timers.
func (p *Prioritizer) promoteDueLocked(now time.Time) {
	for len(p.delayed) > 0 && !p.delayed[0].readyAt.After(now) {
		entry := heap.Pop(&p.delayed).(*partition)
		p.pushReadyLocked(entry)
	}
}

func (p *Prioritizer) pushReadyLocked(entry *partition) {
	entry.state = stateReady
	entry.delayReason = delayNone
	entry.readyAt = time.Time{}
	heap.Push(&p.ready, entry)
}

func (p *Prioritizer) pushDelayedLocked(entry *partition, readyAt time.Time, reason delayReason) {
	entry.state = stateDelayed
	entry.readyAt = readyAt
	entry.delayReason = reason
	heap.Push(&p.delayed, entry)
}

// broadcastLocked wakes every blocked Take. It is also needed when only a
// delayed entry was added, because a waiter's timer may be set for a later one.
func (p *Prioritizer) broadcastLocked() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}
