package postgres

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// The dead-letter filter is one fixed condition (kit.FilterArgs): each
// part is switched off by its own value, which bun inlines, so the planner
// folds the parts that are off away and the text never changes with the
// filter:
//
//	?none = 0
//	AND (?any_id = 1 OR id IN (?ids))
//	AND (?any_partition = 1 OR partition_id IN (?pids))
//	AND (?any_status = 1 OR status IN (?statuses))
//	AND (?payload_type = '' OR payload_type = ?payload_type)
//	AND (?message_id IS NULL OR message_id = ?message_id)
//	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
//	AND (?failed_to IS NULL OR failed_at < ?failed_to)
//	AND (?completed_to IS NULL OR completed_at < ?completed_to)
//	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
//	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
//	AND (?max_id = 0 OR id <= ?max_id)
//
// The locking reads wait (FOR NO KEY UPDATE): an operator's action queues
// behind another's, then sees the rows as that one left them.

// deadLetterSQL is the operators' dead-letter actions.
var deadLetterSQL = kit.DeadLetterSQL{
	List: kit.Inline(`SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at,
	failed_at, last_error, attempts, status, note, completed_at, replay_id
FROM {dead_letters}
WHERE ?none = 0
	AND (?any_id = 1 OR id IN (?ids))
	AND (?any_partition = 1 OR partition_id IN (?pids))
	AND (?any_status = 1 OR status IN (?statuses))
	AND (?payload_type = '' OR payload_type = ?payload_type)
	AND (?message_id IS NULL OR message_id = ?message_id)
	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
	AND (?failed_to IS NULL OR failed_at < ?failed_to)
	AND (?completed_to IS NULL OR completed_at < ?completed_to)
	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
	AND (?max_id = 0 OR id <= ?max_id)
	AND id > ?after
ORDER BY id LIMIT ?limit`),
	ListLock: kit.Inline(`SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at,
	failed_at, last_error, attempts, status, note, completed_at, replay_id
FROM {dead_letters}
WHERE ?none = 0
	AND (?any_id = 1 OR id IN (?ids))
	AND (?any_partition = 1 OR partition_id IN (?pids))
	AND (?any_status = 1 OR status IN (?statuses))
	AND (?payload_type = '' OR payload_type = ?payload_type)
	AND (?message_id IS NULL OR message_id = ?message_id)
	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
	AND (?failed_to IS NULL OR failed_at < ?failed_to)
	AND (?completed_to IS NULL OR completed_at < ?completed_to)
	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
	AND (?max_id = 0 OR id <= ?max_id)
	AND id > ?after
ORDER BY id LIMIT ?limit FOR NO KEY UPDATE`),
	IDs: kit.Inline(`SELECT id, status FROM {dead_letters}
WHERE ?none = 0
	AND (?any_id = 1 OR id IN (?ids))
	AND (?any_partition = 1 OR partition_id IN (?pids))
	AND (?any_status = 1 OR status IN (?statuses))
	AND (?payload_type = '' OR payload_type = ?payload_type)
	AND (?message_id IS NULL OR message_id = ?message_id)
	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
	AND (?failed_to IS NULL OR failed_at < ?failed_to)
	AND (?completed_to IS NULL OR completed_at < ?completed_to)
	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
	AND (?max_id = 0 OR id <= ?max_id)
	AND id > ?after
ORDER BY id LIMIT ?limit`),
	IDsLock: kit.Inline(`SELECT id, status FROM {dead_letters}
WHERE ?none = 0
	AND (?any_id = 1 OR id IN (?ids))
	AND (?any_partition = 1 OR partition_id IN (?pids))
	AND (?any_status = 1 OR status IN (?statuses))
	AND (?payload_type = '' OR payload_type = ?payload_type)
	AND (?message_id IS NULL OR message_id = ?message_id)
	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
	AND (?failed_to IS NULL OR failed_at < ?failed_to)
	AND (?completed_to IS NULL OR completed_at < ?completed_to)
	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
	AND (?max_id = 0 OR id <= ?max_id)
	AND id > ?after
ORDER BY id LIMIT ?limit FOR NO KEY UPDATE`),
	Tally: kit.Inline(`SELECT status, COUNT(*) AS n, MAX(id) AS max_id FROM {dead_letters}
WHERE ?none = 0
	AND (?any_id = 1 OR id IN (?ids))
	AND (?any_partition = 1 OR partition_id IN (?pids))
	AND (?any_status = 1 OR status IN (?statuses))
	AND (?payload_type = '' OR payload_type = ?payload_type)
	AND (?message_id IS NULL OR message_id = ?message_id)
	AND (?failed_from IS NULL OR failed_at >= ?failed_from)
	AND (?failed_to IS NULL OR failed_at < ?failed_to)
	AND (?completed_to IS NULL OR completed_at < ?completed_to)
	AND (?error_text = '' OR strpos(last_error, ?error_text) > 0)
	AND (?headers IS NULL OR headers::jsonb @> CAST(?headers AS jsonb))
	AND (?max_id = 0 OR id <= ?max_id)
GROUP BY status`),
	// Conditioned on the status read under the lock: of two operators one wins.
	SetStatus: kit.Inline(`UPDATE {dead_letters} SET status = ?to, note = COALESCE(?note, note),
	completed_at = CASE WHEN ?final = 1 THEN now() END
WHERE id IN (?ids) AND status = ?from`),
	SetReplayed: kit.Inline(`UPDATE {dead_letters} SET status = ?to, replay_id = CAST(CASE id ?cases END AS bytea)
WHERE id IN (?ids) AND status = ?from`,
		kit.List{Name: "cases", Item: `WHEN ?id THEN ?replay_id`, Sep: " "}),
	Delete: kit.Inline(`DELETE FROM {dead_letters} WHERE id IN (?ids)`),
}

// DeadLetterList lists the letters a filter matches, in id order.
func (d *pgDialect) DeadLetterList(ctx context.Context, p *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error) {
	return deadLetterSQL.Read(ctx, d.Runner, p)
}

// DeadLetterTally counts the letters a filter matches, by status.
func (d *pgDialect) DeadLetterTally(ctx context.Context, p *dialect.DeadLetterTallyParams) (dialect.DeadLetterTally, error) {
	return deadLetterSQL.Count(ctx, d.Runner, p)
}

// DeadLetterUpdate moves the letters still in p.From to p.To.
func (d *pgDialect) DeadLetterUpdate(ctx context.Context, p *dialect.DeadLetterUpdateParams) (int, error) {
	return deadLetterSQL.Move(ctx, d.Runner, p)
}

// DeadLetterDelete deletes letters by id.
func (d *pgDialect) DeadLetterDelete(ctx context.Context, p *dialect.DeadLetterDeleteParams) (int, error) {
	return deadLetterSQL.Remove(ctx, d.Runner, p)
}
