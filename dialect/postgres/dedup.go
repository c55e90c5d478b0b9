package postgres

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// dedupSQL is idempotent enqueue's keys (docs/ARCHITECTURE.md,
// "Idempotent enqueue").
var dedupSQL = kit.DedupSQL{
	// An expired key is taken over in place; an unexpired one is left alone
	// but locked (ON CONFLICT DO UPDATE locks the row even when its WHERE is
	// false). RETURNING lists the rows the upsert wrote, inserted or taken
	// over: those claims are won, and only the others are read back.
	Claim: kit.Inline(`INSERT INTO {dedup_keys} (queue, dedup_key, message_id, expires_at) VALUES ?rows
ON CONFLICT (queue, dedup_key) DO UPDATE SET message_id = EXCLUDED.message_id, expires_at = EXCLUDED.expires_at
	WHERE {dedup_keys}.expires_at <= now()
RETURNING dedup_key`,
		kit.Rows(`(?queue, ?key, ?id, (now() + CAST(?window_us AS double precision) * interval '1 microsecond'))`)),
	ClaimReturns: true,
	// Locking: in READ COMMITTED the lock waits for a claim still open in
	// another transaction and then reads the latest committed holder.
	Holders: kit.Inline(`SELECT dedup_key, message_id FROM {dedup_keys}
WHERE dedup_key IN (?keys) AND queue = ?queue FOR NO KEY UPDATE`),
	KeysArg: func(keys [][]byte) any { return bun.List(keys) },
	// No DELETE … LIMIT: the chunk is picked by ctid from the expiry index.
	// A key taken over meanwhile has a new ctid and a new expiry, and is
	// left (both are checked again on the row's latest version).
	Expire: kit.Inline(`DELETE FROM {dedup_keys} WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM {dedup_keys} WHERE expires_at <= now() ORDER BY expires_at LIMIT ?limit))
AND expires_at <= now()`),
}

// DedupClaim claims each key for its message on p.Conn; see dialect.Dialect.
func (d *pgDialect) DedupClaim(ctx context.Context, p *dialect.DedupClaimParams) ([]dialect.MessageID, error) {
	return dedupSQL.ClaimKeys(ctx, d.Runner, p)
}

// DedupExpire deletes up to p.Limit expired keys.
func (d *pgDialect) DedupExpire(ctx context.Context, p *dialect.DedupExpireParams) (int, error) {
	return dedupSQL.ExpireKeys(ctx, d.Runner, p)
}
