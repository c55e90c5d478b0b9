package sqlite

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// The dead-letter reads take their filter as one fixed condition, every
// part switched off by its own value (kit.FilterArgs), so a statement has
// one text whatever the filter. A bound time is compared as the stored
// text: strftime turns it into the 'YYYY-MM-DD HH:MM:SS.SSS' of the
// columns. SQLite has no row locks: an operator's transaction holds the
// write lock from its start, so the locking reads are the plain ones.
const (
	deadLetterList = `SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at,
failed_at, last_error, attempts, status, note, completed_at, replay_id FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids))
AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses))
AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= strftime('%Y-%m-%d %H:%M:%f', ?failed_from))
AND (?failed_to IS NULL OR failed_at < strftime('%Y-%m-%d %H:%M:%f', ?failed_to))
AND (?completed_to IS NULL OR completed_at < strftime('%Y-%m-%d %H:%M:%f', ?completed_to))
AND (?error_text = '' OR instr(last_error, ?error_text) > 0)
AND (?headers IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?headers) f
  WHERE NOT EXISTS (SELECT 1 FROM json_each(headers) h WHERE h.key = f.key AND h.value = f.value)))
AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit`
	deadLetterIDs = `SELECT id, status FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids))
AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses))
AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= strftime('%Y-%m-%d %H:%M:%f', ?failed_from))
AND (?failed_to IS NULL OR failed_at < strftime('%Y-%m-%d %H:%M:%f', ?failed_to))
AND (?completed_to IS NULL OR completed_at < strftime('%Y-%m-%d %H:%M:%f', ?completed_to))
AND (?error_text = '' OR instr(last_error, ?error_text) > 0)
AND (?headers IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?headers) f
  WHERE NOT EXISTS (SELECT 1 FROM json_each(headers) h WHERE h.key = f.key AND h.value = f.value)))
AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit`
)

var deadLetterSQL = kit.DeadLetterSQL{
	List:     kit.Inline(deadLetterList),
	ListLock: kit.Inline(deadLetterList),
	IDs:      kit.Inline(deadLetterIDs),
	IDsLock:  kit.Inline(deadLetterIDs),
	Tally: kit.Inline(`SELECT status, COUNT(*) AS n, MAX(id) AS max_id FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids))
AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses))
AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= strftime('%Y-%m-%d %H:%M:%f', ?failed_from))
AND (?failed_to IS NULL OR failed_at < strftime('%Y-%m-%d %H:%M:%f', ?failed_to))
AND (?completed_to IS NULL OR completed_at < strftime('%Y-%m-%d %H:%M:%f', ?completed_to))
AND (?error_text = '' OR instr(last_error, ?error_text) > 0)
AND (?headers IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?headers) f
  WHERE NOT EXISTS (SELECT 1 FROM json_each(headers) h WHERE h.key = f.key AND h.value = f.value)))
AND (?max_id = 0 OR id <= ?max_id)
GROUP BY status`),
	// Conditioned on the status read before: of two operators one wins.
	SetStatus: kit.Inline(`UPDATE {dead_letters} SET status = ?to, note = COALESCE(?note, note),
completed_at = CASE WHEN ?final = 1 THEN strftime('%Y-%m-%d %H:%M:%f', 'now') END
WHERE id IN (?ids) AND status = ?from`),
	SetReplayed: kit.Inline(`UPDATE {dead_letters} SET status = ?to, replay_id = CAST(CASE id ?cases END AS BLOB)
WHERE id IN (?ids) AND status = ?from`,
		kit.List{Name: "cases", Item: `WHEN ?id THEN ?replay_id`, Sep: " "}),
	Delete: kit.Inline(`DELETE FROM {dead_letters} WHERE id IN (?ids)`),
}

// DeadLetterList lists the letters a filter matches, in id order.
func (d *sqliteDialect) DeadLetterList(ctx context.Context, p *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error) {
	return deadLetterSQL.Read(ctx, d.Runner, p)
}

// DeadLetterTally counts the letters a filter matches, by status.
func (d *sqliteDialect) DeadLetterTally(ctx context.Context, p *dialect.DeadLetterTallyParams) (dialect.DeadLetterTally, error) {
	return deadLetterSQL.Count(ctx, d.Runner, p)
}

// DeadLetterUpdate moves the letters still in p.From to p.To on p.Conn.
func (d *sqliteDialect) DeadLetterUpdate(ctx context.Context, p *dialect.DeadLetterUpdateParams) (int, error) {
	return deadLetterSQL.Move(ctx, d.Runner, p)
}

// DeadLetterDelete deletes letters by id on p.Conn.
func (d *sqliteDialect) DeadLetterDelete(ctx context.Context, p *dialect.DeadLetterDeleteParams) (int, error) {
	return deadLetterSQL.Remove(ctx, d.Runner, p)
}
