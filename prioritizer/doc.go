// Package prioritizer schedules dirty outbox partitions for sequencer workers.
//
// Producers report that a partition has (or may soon have) unsequenced rows
// with MarkDirty and MarkMaybeDirty. Workers call Take (or TryTake) to claim
// one ready partition, move its rows, and report exactly one outcome on the
// returned Claim (Done, Skipped, Retry or Failed); a deferred Release covers
// the paths that report nothing, such as a panic.
//
// Every known partition is in exactly one state:
//
//   - pending-ready: waiting to be taken, ordered oldest dirtySince first
//     (ties broken by the lower partition id), so no partition starves;
//   - pending-delayed: waiting for a point in time (error backoff, a skip
//     because another instance holds the partition lock, or the next re-check
//     of a probing partition);
//   - claimed: held by exactly one worker until it reports an outcome.
//
// A partition in none of these states is idle and is not stored at all, so
// memory is proportional to the number of partitions with work in flight.
//
// The scheduler is purely in memory and safe for concurrent use. It is a hint
// layer: losing it (a process restart) only delays work until the partitions
// are marked again, so it never persists anything.
//
// Applications do not use this package directly: it exports only what
// seqbox's engine wires together (docs/ARCHITECTURE.md, "The public
// surface"), and its API carries no compatibility promise; it may change
// in any release.
package prioritizer
