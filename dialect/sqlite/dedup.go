package sqlite

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// dedupSQL is idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent
// enqueue").
var dedupSQL = kit.DedupSQL{
	// The upsert takes an expired key over in place and leaves an
	// unexpired one alone. It returns nothing: a plain exec followed by a
	// read of every key ran faster here than an upsert with RETURNING plus
	// a read of the rest, the write being what costs (BENCHMARKS.md,
	// "Figures behind design choices", "SQLite dedup claim without RETURNING").
	// Prepared in pieces like the enqueue's INSERTs (enqueue.go).
	Claim: kit.PrepareRows(`INSERT INTO {dedup_keys} (queue, dedup_key, message_id, expires_at) VALUES ?rows
ON CONFLICT (queue, dedup_key) DO UPDATE SET message_id = excluded.message_id, expires_at = excluded.expires_at
WHERE {dedup_keys}.expires_at <= strftime('%Y-%m-%d %H:%M:%f', 'now')`,
		kit.Rows(`(?queue, ?key, ?id, strftime('%Y-%m-%d %H:%M:%f', 'now', (?window_us / 1000000.0) || ' seconds'))`)),
	ClaimReturns: false,
	// No row locks: the transaction holds the write lock from its start,
	// so no other writer changes a holder meanwhile.
	Holders: kit.Inline(`SELECT dedup_key, message_id FROM {dedup_keys} WHERE dedup_key IN (?keys) AND queue = ?queue`),
	KeysArg: func(keys [][]byte) any { return bun.List(keys) },
	// DELETE … LIMIT needs a compile-time option; a rowid sub-select
	// bounds the delete everywhere, oldest first.
	Expire: kit.Inline(`DELETE FROM {dedup_keys} WHERE rowid IN (
SELECT rowid FROM {dedup_keys} WHERE expires_at <= strftime('%Y-%m-%d %H:%M:%f', 'now') ORDER BY expires_at LIMIT ?limit)`),
}

// DedupClaim claims each key for its message on p.Conn.
func (d *sqliteDialect) DedupClaim(ctx context.Context, p *dialect.DedupClaimParams) ([]dialect.MessageID, error) {
	return dedupSQL.ClaimKeys(ctx, d.Runner, p)
}

// DedupExpire deletes up to p.Limit expired keys.
func (d *sqliteDialect) DedupExpire(ctx context.Context, p *dialect.DedupExpireParams) (int, error) {
	return dedupSQL.ExpireKeys(ctx, d.Runner, p)
}
