package sqlcore

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"

	"github.com/seqbox/seqbox/dialect"
)

// Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue").
const (
	// A claim inserts the key, takes over an expired one in place
	// ({dedup_upsert}), and leaves an unexpired one alone. Where the
	// database returns the rows an upsert wrote ({dedup_returning}), those
	// are the claims won, and only the rest are read back; elsewhere
	// (MySQL) every holder is read back. The read-back locks
	// ({dedup_holders}): in READ COMMITTED, and under InnoDB's locking
	// reads at any level, it sees the latest committed holder.
	stmtDedupClaim   = "INSERT INTO {dedup_keys} (queue, dedup_key, message_id, expires_at) VALUES ? {dedup_upsert}{dedup_returning}"
	stmtDedupRow     = "(?, ?, ?, {now_plus_window})"
	stmtDedupHolders = "{dedup_holders}"
	stmtDedupExpire  = "{dedup_expire}"
)

// dedupChunk bounds the keys of one statement (at most 255 bytes each,
// inlined as hex).
const dedupChunk = 1000

// DedupClaim claims keys in key order, so that two producers claiming
// overlapping sets lock them in one order, and returns each claim's holder.
func (c *Core) DedupClaim(ctx context.Context, p *dialect.DedupClaimParams) ([]dialect.MessageID, error) {
	order := make([]int, len(p.Claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare([]byte(p.Claims[a].Key), []byte(p.Claims[b].Key)) })
	out := make([]dialect.MessageID, len(p.Claims))
	returning := c.x.words["dedup_returning"] != ""
	windowUS := p.Window.Microseconds()
	row := c.SQL(stmtDedupRow)
	for start := 0; start < len(order); start += dedupChunk {
		chunk := order[start:min(start+dedupChunk, len(order))]
		values := valuesOf(len(chunk), func(gen schema.QueryGen, b []byte, i int) []byte {
			cl := &p.Claims[chunk[i]]
			return gen.AppendQuery(b, row, p.Queue, []byte(cl.Key), cl.ID[:], windowUS)
		})
		won := map[string]bool{}
		q := c.Raw(p.Conn, c.SQL(stmtDedupClaim), values)
		if returning {
			var keys [][]byte
			if err := q.Scan(ctx, &keys); err != nil {
				return nil, c.Wrap(err)
			}
			for _, k := range keys {
				won[string(k)] = true
			}
		} else if _, err := q.Exec(ctx); err != nil {
			return nil, c.Wrap(err)
		}
		var ask [][]byte
		for _, ci := range chunk {
			if cl := &p.Claims[ci]; won[cl.Key] {
				out[ci] = cl.ID
			} else {
				ask = append(ask, []byte(cl.Key))
			}
		}
		if len(ask) == 0 {
			continue
		}
		var holders []struct {
			Key []byte `bun:"dedup_key"`
			ID  []byte `bun:"message_id"`
		}
		if err := c.Raw(p.Conn, c.SQL(stmtDedupHolders), c.flavor.DedupKeyList(ask), p.Queue).Scan(ctx, &holders); err != nil {
			return nil, c.Wrap(err)
		}
		byKey := make(map[string]dialect.MessageID, len(holders))
		for _, h := range holders {
			byKey[string(h.Key)] = toID(h.ID)
		}
		for _, ci := range chunk {
			cl := &p.Claims[ci]
			if won[cl.Key] {
				continue
			}
			id, ok := byKey[cl.Key]
			if !ok {
				// The claim's own row cannot vanish inside its transaction.
				return nil, fmt.Errorf("seqbox: dedup key of message %x not found after its claim", cl.ID)
			}
			out[ci] = id
		}
	}
	return out, nil
}

// DedupExpire deletes up to Limit expired keys in one statement.
func (c *Core) DedupExpire(ctx context.Context, p *dialect.DedupExpireParams) (int, error) {
	var n int64
	err := c.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		res, err := c.Raw(tx, c.SQL(stmtDedupExpire), p.Limit).Exec(ctx)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
