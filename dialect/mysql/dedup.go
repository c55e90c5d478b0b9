package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// dedupSQL is idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue").
var dedupSQL = kit.DedupSQL{
	// A claim inserts the key, takes an expired one over in place and
	// leaves an unexpired one alone. Assignments run left to right:
	// message_id is decided on the old expires_at, which the second
	// assignment then moves. VALUES() is the form both MySQL and MariaDB
	// accept. Neither returns the rows an upsert wrote, so every holder is
	// read back.
	Claim: kit.Inline(`INSERT INTO {dedup_keys} (queue, dedup_key, message_id, expires_at) VALUES ?rows
ON DUPLICATE KEY UPDATE
message_id = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(message_id), message_id),
expires_at = IF(expires_at <= UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`,
		kit.Rows(`(?queue, ?key, ?id, TIMESTAMPADD(MICROSECOND, ?window_us, UTC_TIMESTAMP(6)))`)),
	ClaimReturns: false,
	// Each key probed by primary key from a JSON list of hex keys: a
	// locking read of "dedup_key IN (…)" is a range scan under REPEATABLE
	// READ (a caller's transaction may be), whose gap locks deadlocked
	// producers claiming unrelated keys. The read locks: in READ COMMITTED,
	// and under InnoDB's locking reads at any level, it sees the latest
	// committed holder.
	Holders: kit.Inline(`SELECT d.dedup_key, d.message_id
FROM JSON_TABLE(?keys, '$[*]' COLUMNS (k VARCHAR(510) PATH '$')) j
STRAIGHT_JOIN {dedup_keys} d ON d.queue = ?queue AND d.dedup_key = UNHEX(j.k) FOR UPDATE`),
	KeysArg: func(keys [][]byte) any { return kit.HexJSONArray(keys) },
	// Oldest first, through the expires_at index.
	Expire: kit.Inline(`DELETE FROM {dedup_keys} WHERE expires_at <= UTC_TIMESTAMP(6) ORDER BY expires_at LIMIT ?limit`),
}

// DedupClaim claims each key for its message on p.Conn.
func (d *mysqlDialect) DedupClaim(ctx context.Context, p *dialect.DedupClaimParams) ([]dialect.MessageID, error) {
	return dedupSQL.ClaimKeys(ctx, d.Runner, p)
}

// DedupExpire deletes up to p.Limit expired keys.
func (d *mysqlDialect) DedupExpire(ctx context.Context, p *dialect.DedupExpireParams) (int, error) {
	return dedupSQL.ExpireKeys(ctx, d.Runner, p)
}
