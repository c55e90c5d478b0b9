package sqlcore

import (
	"context"
	"strings"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// Purge (docs/ARCHITECTURE.md, "Purge"). {header_matches} becomes one
// "AND {header_match}" per header (two values each: name, value) before
// expansion, so a statement has a handful of shapes.
const (
	stmtPurgeLockPartition = "SELECT sequence FROM {partitions} WHERE id = ?{row_lock_wait}"
	// lease_window: how far past the cursor a live lease's batch may reach
	// (a lease from before lease_limit existed: the largest batch, ?).
	stmtPurgeReadProcessor = "SELECT processed_seq, CASE WHEN locked_until IS NOT NULL AND locked_until > {now} " +
		"THEN COALESCE(lease_limit, CAST(? AS {bigint_type})) ELSE 0 END AS lease_window " +
		"FROM {processor} WHERE partition_id = ?"
	stmtPurgeLockProcessor = stmtPurgeReadProcessor + "{row_lock_wait}"
	stmtPurgeIncoming      = "SELECT i.id, i.body_id FROM {incoming} i {body_of_i} " +
		"WHERE i.partition_id = ?{header_matches} ORDER BY i.id LIMIT ?"
	stmtPurgeCountIncoming = "SELECT COUNT(*) FROM {incoming} i {body_of_i} WHERE i.partition_id = ?{header_matches}"
	stmtPurgeOutgoing      = "SELECT o.seq, o.body_id FROM {outgoing} o {body_of_o} " +
		"WHERE o.partition_id = ? AND o.seq > ? AND o.purged = 0{header_matches} ORDER BY o.seq LIMIT ?"
	stmtPurgeCountOutgoing = "SELECT COUNT(*) FROM {outgoing} o {body_of_o} " +
		"WHERE o.partition_id = ? AND o.seq > ? AND o.seq <= ? AND o.purged = 0{header_matches}"
	stmtPurgeDeleteIncoming = "DELETE FROM {incoming} WHERE id IN (?)"
	stmtPurgeDeleteBodies   = "DELETE FROM {body} WHERE id IN (?)"
	stmtPurgeTombstone      = "UPDATE {outgoing} SET purged = 1 WHERE partition_id = ? AND seq IN (?)"
	// A tombstone keeps its body row (the id, for WaitProcessed and the
	// vacuum's join) but not its data.
	stmtPurgeBlankBodies = "UPDATE {body} SET payload = ?, headers = NULL, msg_key = NULL WHERE id IN (?)"
	// Counts the purges that made tombstones: a lease statement that read
	// its batch from an older snapshot sees it changed (PostgreSQL).
	stmtPurgeCount = "UPDATE {processor} SET purges = purges + 1 WHERE partition_id = ?"
)

// withMatches fills {header_matches} for n headers.
func withMatches(stmt string, n int) string {
	return strings.Replace(stmt, "{header_matches}", strings.Repeat(" AND {header_match}", n), 1)
}

// matchArgs are the headers' values in statement order.
func matchArgs(hs []dialect.Header) []any {
	out := make([]any, 0, 2*len(hs))
	for _, h := range hs {
		out = append(out, h.Key, h.Value)
	}
	return out
}

// PurgePartition purges up to Limit messages of each stage in one
// transaction. The partition row lock keeps the sequencer from moving rows
// meanwhile, the processor row lock keeps a lease from being taken or
// acked meanwhile (and waits out a transactional delivery), so a message
// is either purged here or delivered, never both.
func (c *Core) PurgePartition(ctx context.Context, p *dialect.PurgeParams) (dialect.PurgeResult, error) {
	var res dialect.PurgeResult
	n := len(p.Headers)
	matches := matchArgs(p.Headers)
	args := func(head []any, tail ...any) []any {
		out := append(append(head, matches...), tail...)
		return out
	}
	err := c.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res = dialect.PurgeResult{}
		var seq []int64
		if !p.DryRun {
			if err := c.Raw(tx, c.SQL(stmtPurgeLockPartition), p.PartitionID).Scan(ctx, &seq); err != nil {
				return err
			}
		}
		var procs []struct {
			ProcessedSeq int64 `bun:"processed_seq"`
			LeaseWindow  int64 `bun:"lease_window"`
		}
		lockProc := stmtPurgeLockProcessor
		if p.DryRun {
			lockProc = stmtPurgeReadProcessor
		}
		if err := c.Raw(tx, c.SQL(lockProc), p.LeaseWindow, p.PartitionID).Scan(ctx, &procs); err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil // not a registered partition: nothing of it to purge
		}
		cursor := procs[0].ProcessedSeq
		bound := cursor + procs[0].LeaseWindow
		if bound > cursor {
			if err := c.Raw(tx, c.SQL(withMatches(stmtPurgeCountOutgoing, n)), args([]any{p.PartitionID, cursor, bound})...).
				Scan(ctx, &res.InFlight); err != nil {
				return err
			}
		}
		if p.DryRun {
			if err := c.Raw(tx, c.SQL(withMatches(stmtPurgeCountIncoming, n)), args([]any{p.PartitionID})...).
				Scan(ctx, &res.Incoming); err != nil {
				return err
			}
			const noEnd = int64(1<<63 - 1)
			return c.Raw(tx, c.SQL(withMatches(stmtPurgeCountOutgoing, n)), args([]any{p.PartitionID, bound, noEnd})...).
				Scan(ctx, &res.Outgoing)
		}

		var in []struct {
			ID     int64  `bun:"id"`
			BodyID []byte `bun:"body_id"`
		}
		if err := c.Raw(tx, c.SQL(withMatches(stmtPurgeIncoming, n)), args([]any{p.PartitionID}, p.Limit)...).Scan(ctx, &in); err != nil {
			return err
		}
		if len(in) > 0 {
			ids, bodies := make([]int64, len(in)), make([][]byte, len(in))
			for i, r := range in {
				ids[i], bodies[i] = r.ID, r.BodyID
			}
			if _, err := c.Raw(tx, c.SQL(stmtPurgeDeleteIncoming), bun.List(ids)).Exec(ctx); err != nil {
				return err
			}
			if _, err := c.Raw(tx, c.SQL(stmtPurgeDeleteBodies), bun.List(bodies)).Exec(ctx); err != nil {
				return err
			}
		}

		var out []struct {
			Seq    int64  `bun:"seq"`
			BodyID []byte `bun:"body_id"`
		}
		if err := c.Raw(tx, c.SQL(withMatches(stmtPurgeOutgoing, n)), args([]any{p.PartitionID, bound}, p.Limit)...).Scan(ctx, &out); err != nil {
			return err
		}
		if len(out) > 0 {
			seqs, bodies := make([]int64, len(out)), make([][]byte, len(out))
			for i, r := range out {
				seqs[i], bodies[i] = r.Seq, r.BodyID
			}
			if _, err := c.Raw(tx, c.SQL(stmtPurgeTombstone), p.PartitionID, bun.List(seqs)).Exec(ctx); err != nil {
				return err
			}
			if _, err := c.Raw(tx, c.SQL(stmtPurgeBlankBodies), []byte{}, bun.List(bodies)).Exec(ctx); err != nil {
				return err
			}
			if _, err := c.Raw(tx, c.SQL(stmtPurgeCount), p.PartitionID).Exec(ctx); err != nil {
				return err
			}
		}
		res.Incoming, res.Outgoing = len(in), len(out)
		res.More = len(in) == p.Limit || len(out) == p.Limit
		return nil
	})
	return res, err
}
