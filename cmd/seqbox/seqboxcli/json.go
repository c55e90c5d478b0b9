package seqboxcli

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"time"
	"unicode/utf8"

	"github.com/seqbox/seqbox/deadletter"
)

// The --json output of every command: one document on stdout, of the
// type named below (docs/CLI.md describes each field). Keys are
// snake_case; a time is RFC 3339 in UTC, and a time that is not set is
// left out (never 0001-01-01); a list is [] when empty, never null. A
// command that fails may print nothing on stdout: its error is on stderr
// and its exit code is not 0.

// MigrateJSON is `seqbox migrate [--status] --json`.
type MigrateJSON struct {
	Prefix string `json:"prefix"`
	// Version is the schema version now; Latest the one this seqbox
	// brings; Pending how many migrations are left to apply.
	Version int `json:"version"`
	Latest  int `json:"latest"`
	Pending int `json:"pending"`
	// Applied is how many migrations this run applied (0 with --status).
	Applied int  `json:"applied"`
	DryRun  bool `json:"dry_run"`
}

// StatusJSON is `seqbox status --json`: one entry per queue.
type StatusJSON struct {
	At     time.Time         `json:"at"`
	Queues []QueueStatusJSON `json:"queues"`
}

// QueueStatusJSON is one queue's totals.
type QueueStatusJSON struct {
	Queue       string `json:"queue"`
	Partitions  int    `json:"partitions"`
	Incoming    int64  `json:"incoming"`
	Unprocessed int64  `json:"unprocessed"`
	// OldestAgeMs is the age of the oldest message not yet acked (0: none).
	OldestAgeMs int64            `json:"oldest_unprocessed_age_ms"`
	Retrying    int              `json:"retrying_partitions"`
	Parked      int              `json:"parked_partitions"`
	DeadLetters DeadLetterCounts `json:"dead_letters"`
}

// StatusPartitionsJSON is `seqbox status --partitions --json`: one entry
// per partition.
type StatusPartitionsJSON struct {
	At         time.Time             `json:"at"`
	Partitions []PartitionStatusJSON `json:"partitions"`
}

// PartitionStatusJSON is one partition's backlog and head of line.
type PartitionStatusJSON struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	// State is idle, working, retrying or parked.
	State        string `json:"state"`
	Incoming     int64  `json:"incoming"`
	Unprocessed  int64  `json:"unprocessed"`
	Sequence     int64  `json:"sequence"`
	ProcessedSeq int64  `json:"processed_seq"`
	OldestAgeMs  int64  `json:"oldest_unprocessed_age_ms"`
	// Attempts and LastError describe a failing head.
	Attempts      int              `json:"attempts"`
	LastError     string           `json:"last_error,omitempty"`
	NextAttemptAt time.Time        `json:"next_attempt_at,omitzero"`
	LeaseUntil    time.Time        `json:"lease_until,omitzero"`
	ParkedAt      time.Time        `json:"parked_at,omitzero"`
	DeadLetters   DeadLetterCounts `json:"dead_letters"`
}

// DeadLetterCounts is dead letters by status: `seqbox dlq count --json`,
// and each queue's and partition's dead_letters in status.
type DeadLetterCounts struct {
	Pending   int64 `json:"pending"`
	Replayed  int64 `json:"replayed"`
	Resolved  int64 `json:"resolved"`
	Discarded int64 `json:"discarded"`
	Total     int64 `json:"total"`
}

func deadLetterCounts[S ~string](m map[S]int64) DeadLetterCounts {
	c := DeadLetterCounts{
		Pending:   m[S(deadletter.StatusPending)],
		Replayed:  m[S(deadletter.StatusReplayed)],
		Resolved:  m[S(deadletter.StatusResolved)],
		Discarded: m[S(deadletter.StatusDiscarded)],
	}
	c.Total = c.Pending + c.Replayed + c.Resolved + c.Discarded
	return c
}

// DLQListJSON is `seqbox dlq list --json`.
type DLQListJSON struct {
	Letters []LetterJSON `json:"letters"`
	// NextAfter is the --after of the next page; 0 after the last.
	NextAfter int64 `json:"next_after"`
}

// LetterJSON is one dead letter (`seqbox dlq show --json` prints one).
//
// Bytes (the key and the payload) are printed as text when they are
// valid UTF-8; otherwise as hex, and key_encoding or payload_encoding is
// "hex". Payload and headers are in dlq show, and in dlq list with
// --payloads.
type LetterJSON struct {
	ID              int64             `json:"id"`
	Queue           string            `json:"queue"`
	Partition       int               `json:"partition"`
	Seq             int64             `json:"seq"`
	MessageID       string            `json:"message_id"`
	Key             string            `json:"key,omitempty"`
	KeyEncoding     string            `json:"key_encoding,omitempty"`
	PayloadType     string            `json:"payload_type"`
	Payload         string            `json:"payload,omitempty"`
	PayloadEncoding string            `json:"payload_encoding,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	EnqueuedAt      time.Time         `json:"enqueued_at,omitzero"`
	FailedAt        time.Time         `json:"failed_at,omitzero"`
	LastError       string            `json:"last_error"`
	Attempts        int               `json:"attempts"`
	Status          string            `json:"status"`
	Note            string            `json:"note,omitempty"`
	CompletedAt     time.Time         `json:"completed_at,omitzero"`
	ReplayID        string            `json:"replay_id,omitempty"`
}

// DLQActionJSON is `seqbox dlq replay|resolve|discard|purge --json`, with
// --yes (dry_run false) or without (a preview, dry_run true).
type DLQActionJSON struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
	// Count is how many letters the action changed, or would change.
	Count int64 `json:"count"`
	// Letters, in a dry run, are the first letters it would change (up to
	// 100, without payloads); More says there are more. Empty otherwise.
	Letters []LetterJSON `json:"letters"`
	More    bool         `json:"more"`
	// Changed are the ids of the letters changed (empty in a dry run);
	// ReplayIDs, for replay, the copies' message ids, parallel to it.
	Changed   []int64  `json:"changed"`
	ReplayIDs []string `json:"replay_ids,omitempty"`
	// CompletedBefore is purge's cutoff: letters resolved or discarded
	// before it.
	CompletedBefore time.Time `json:"completed_before,omitzero"`
}

// PartitionsListJSON is `seqbox partitions list --json`.
type PartitionsListJSON struct {
	Partitions []PartitionJSON `json:"partitions"`
}

// PartitionJSON is a retrying or parked partition.
type PartitionJSON struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	// State is retrying or parked.
	State string `json:"state"`
	// HeadSeq is the seq of the head message, the one that failed.
	HeadSeq   int64  `json:"head_seq"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	// NextAttemptAt is when a retrying head is retried (absent: due now).
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	ParkedAt      time.Time `json:"parked_at,omitzero"`
	// InFlight: the head is being delivered now (retry and skip refuse).
	InFlight bool `json:"in_flight"`
}

// PartitionsActionJSON is `seqbox partitions resume|retry|skip --json`,
// with --yes (dry_run false) or without (dry_run true).
type PartitionsActionJSON struct {
	Action  string                `json:"action"`
	DryRun  bool                  `json:"dry_run"`
	Results []PartitionResultJSON `json:"results"`
}

// PartitionResultJSON is the action on one partition: done (or, in a dry
// run, to be done) when Error is empty; otherwise Error says why it was
// (or would be) refused, and nothing changed for it.
type PartitionResultJSON struct {
	Queue     string `json:"queue"`
	Partition int    `json:"partition"`
	// State is the partition's state before the action: retrying, parked
	// or ok; absent when the partition does not exist.
	State     string `json:"state,omitempty"`
	HeadSeq   int64  `json:"head_seq,omitempty"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
	// DeadLetteredMessageID is the head skip dead-lettered (not in a dry run).
	DeadLetteredMessageID string `json:"dead_lettered_message_id,omitempty"`
	Error                 string `json:"error,omitempty"`
}

// PurgeJSON is `seqbox purge --json`, with --yes or without (dry_run).
type PurgeJSON struct {
	Queue  string `json:"queue"`
	DryRun bool   `json:"dry_run"`
	// Incoming are messages not sequenced yet (deleted), Outgoing those
	// sequenced (made tombstones), InDelivery those matching but being
	// delivered now (left to that delivery).
	Incoming   int                  `json:"incoming"`
	Outgoing   int                  `json:"outgoing"`
	InDelivery int                  `json:"in_delivery"`
	Partitions []PurgePartitionJSON `json:"partitions"`
}

// PurgePartitionJSON is one partition's share of a purge.
type PurgePartitionJSON struct {
	Partition  int `json:"partition"`
	Incoming   int `json:"incoming"`
	Outgoing   int `json:"outgoing"`
	InDelivery int `json:"in_delivery"`
}

// VersionJSON is `seqbox version --json`.
type VersionJSON struct {
	// Version is the seqbox module's version, "(devel)" when built from a
	// checkout.
	Version string `json:"version"`
	// Revision is the VCS commit it was built from, when known; Modified
	// says the checkout had local changes.
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// bytesJSON prints b as text when it is valid UTF-8, else as hex with
// the encoding named.
func bytesJSON(b []byte) (text, encoding string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return hex.EncodeToString(b), "hex"
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine prints v on one line: status --watch --json prints one
// document per refresh (JSON Lines).
func writeJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
