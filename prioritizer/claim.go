// A Claim and its outcomes (Done, Skipped, Retry, Failed, Release): how
// each reschedules the partition, and the delays they compute.

package prioritizer

import (
	"time"
)

// errorBackoff returns base * 2^(failures-1), capped at maxDelay, without
// overflowing for any failure count.
func errorBackoff(failures int, base, maxDelay time.Duration) time.Duration {
	delay := base
	for range failures - 1 {
		// Comparing before doubling keeps delay*2 <= maxDelay, so it cannot overflow.
		if delay > maxDelay/2 {
			return maxDelay
		}
		delay *= 2
	}
	return min(delay, maxDelay)
}

// Claim is one worker's exclusive hold on a partition. Report exactly one
// outcome; only the first one counts and later calls are no-ops.
type Claim struct {
	prioritizer *Prioritizer
	entry       *partition
	reported    bool // guarded by prioritizer.mu
}

// PartitionID returns the id of the claimed partition.
func (c *Claim) PartitionID() int64 {
	return c.entry.id
}

// Done reports that the worker committed its batch(es), moving moved rows;
// saturated means the last batch was full, so more rows are likely waiting.
func (c *Claim) Done(moved int, saturated bool) {
	c.report(func(p *Prioritizer, entry *partition, now time.Time) {
		entry.consecutiveFailures = 0
		if moved > 0 {
			entry.nextProbeDelay = p.cfg.ProbeDelayMin
		}
		switch {
		case saturated || entry.redirtied:
			// dirtySince = now puts it behind partitions that have been
			// waiting, so one busy partition cannot monopolise the workers.
			entry.dirtySince = now
			p.pushReadyLocked(entry)
		case entry.probeUntil.After(now):
			readyAt := now.Add(entry.nextProbeDelay)
			// A probe is a guess, not a dirty signal: rank it as dirty only
			// from when it is due, behind genuinely dirty partitions.
			entry.dirtySince = readyAt
			if moved == 0 {
				entry.nextProbeDelay = min(doubled(entry.nextProbeDelay), p.cfg.ProbeDelayMax)
			}
			p.pushDelayedLocked(entry, readyAt, delayProbe)
		default:
			delete(p.partitions, entry.id)
		}
	})
}

// Skipped reports that another instance holds the partition's row lock. The
// partition keeps its priority and is offered again after SkipDelay, without
// an error penalty.
func (c *Claim) Skipped() {
	c.report(func(p *Prioritizer, entry *partition, now time.Time) {
		p.pushDelayedLocked(entry, now.Add(p.cfg.SkipDelay), delaySkip)
	})
}

// Retry reports retryable contention (deadlock, serialization failure,
// busy). The partition keeps its priority and is ready again at once.
func (c *Claim) Retry() {
	c.report(func(p *Prioritizer, entry *partition, _ time.Time) {
		p.pushReadyLocked(entry)
	})
}

// Failed reports any other error. The partition keeps its priority but waits
// an exponential backoff that grows with consecutive failures.
func (c *Claim) Failed() {
	c.report(func(p *Prioritizer, entry *partition, now time.Time) {
		entry.consecutiveFailures++
		delay := errorBackoff(entry.consecutiveFailures, p.cfg.ErrorBackoffBase, p.cfg.ErrorBackoffMax)
		p.pushDelayedLocked(entry, now.Add(delay), delayBackoff)
	})
}

// Release is meant to be deferred right after Take. If no outcome was
// reported (for example the worker panicked) the partition is ready again at
// once with its priority; otherwise it does nothing.
func (c *Claim) Release() {
	c.Retry()
}

// report applies the first outcome of the claim under the lock and ignores
// the rest. Every outcome ends the claim and leaves the partition pending or
// idle; a mark received while claimed is thereby consumed, since being
// pending already guarantees another pass.
func (c *Claim) report(outcome func(p *Prioritizer, entry *partition, now time.Time)) {
	p := c.prioritizer
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.reported {
		return
	}
	c.reported = true
	p.claimed--
	outcome(p, c.entry, p.cfg.Now())
	c.entry.redirtied = false
	p.broadcastLocked()
}

func doubled(d time.Duration) time.Duration {
	if d > maxDuration/2 {
		return maxDuration
	}
	return d * 2
}

const maxDuration = time.Duration(1<<63 - 1)
