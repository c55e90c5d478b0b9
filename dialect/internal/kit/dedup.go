package kit

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
)

// DedupSQL is the statements of idempotent enqueue (docs/ARCHITECTURE.md,
// "Idempotent enqueue").
type DedupSQL struct {
	// Claim inserts ?rows (?queue ?key ?id, expiring ?window_us
	// microseconds from now), takes an expired key over in place and
	// leaves an unexpired one alone; where ClaimReturns, it returns the
	// dedup_key of each row it wrote (inserted or taken over), and only
	// the other keys are read back.
	Claim        *Stmt
	ClaimReturns bool
	// Holders reads, locking, the holders of the keys ?keys (KeysArg) of
	// queue ?queue: dedup_key, message_id. It sees the latest committed
	// holder: in READ COMMITTED, and under InnoDB's locking reads at any
	// level.
	Holders *Stmt
	KeysArg func(keys [][]byte) any
	// Expire deletes up to ?limit keys whose window has passed.
	Expire *Stmt
}

// dedupChunk bounds the keys of one statement (at most 255 bytes each,
// inlined as hex).
const dedupChunk = 1000

// ClaimKeys claims keys in key order, so that two producers claiming
// overlapping sets lock them in one order, and returns each claim's holder.
func (s *DedupSQL) ClaimKeys(ctx context.Context, r *Runner, p *dialect.DedupClaimParams) ([]dialect.MessageID, error) {
	order := make([]int, len(p.Claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare([]byte(p.Claims[a].Key), []byte(p.Claims[b].Key)) })
	out := make([]dialect.MessageID, len(p.Claims))
	windowUS := p.Window.Microseconds()
	for start := 0; start < len(order); start += dedupChunk {
		chunk := order[start:min(start+dedupChunk, len(order))]
		rows := make([]Args, len(chunk))
		for i, ci := range chunk {
			cl := &p.Claims[ci]
			rows[i] = Args{"queue": p.Queue, "key": []byte(cl.Key), "id": cl.ID[:], "window_us": windowUS}
		}
		won := map[string]bool{}
		if s.ClaimReturns {
			var keys [][]byte
			if err := r.Query(ctx, p.Conn, s.Claim, Args{"rows": rows}, &keys); err != nil {
				return nil, err
			}
			for _, k := range keys {
				won[string(k)] = true
			}
		} else if _, err := r.Exec(ctx, p.Conn, s.Claim, Args{"rows": rows}); err != nil {
			return nil, err
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
		if err := r.Query(ctx, p.Conn, s.Holders, Args{"keys": s.KeysArg(ask), "queue": p.Queue}, &holders); err != nil {
			return nil, err
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

// ExpireKeys deletes up to p.Limit expired keys in one statement.
func (s *DedupSQL) ExpireKeys(ctx context.Context, r *Runner, p *dialect.DedupExpireParams) (int, error) {
	var n int64
	err := r.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) (err error) {
		n, err = r.Affected(ctx, tx, s.Expire, Args{"limit": p.Limit})
		return err
	})
	return int(n), err
}
