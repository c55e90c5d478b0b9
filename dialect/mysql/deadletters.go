package mysql

import (
	"context"

	"github.com/seqbox/seqbox/dialect"
	"github.com/seqbox/seqbox/dialect/internal/kit"
)

// The dead-letter filter is one fixed condition, written out in each
// statement that takes it; every part is switched off by its own value
// (kit.FilterArgs), so the text is the same whatever the filter. The
// values are inlined, so the server folds the parts switched off away
// before it plans (an id or partition list then reaches the index):
//
//	?none = 0
//	AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
//	AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
//	AND (?message_id IS NULL OR message_id = ?message_id)
//	AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
//	AND (?completed_to IS NULL OR completed_at < ?completed_to)
//	AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
//	AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)

// deadLetterSQL is the operators' dead-letter actions (deadletter.Admin).
// The locking forms wait (FOR UPDATE, no SKIP LOCKED): an operator's
// action queues behind another's, then sees the letters as it left them.
var deadLetterSQL = kit.DeadLetterSQL{
	List: kit.Inline(`SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at,
failed_at, last_error, attempts, status, note, completed_at, replay_id FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
AND (?completed_to IS NULL OR completed_at < ?completed_to)
AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit`),
	ListLock: kit.Inline(`SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at,
failed_at, last_error, attempts, status, note, completed_at, replay_id FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
AND (?completed_to IS NULL OR completed_at < ?completed_to)
AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit FOR UPDATE`),
	IDs: kit.Inline(`SELECT id, status FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
AND (?completed_to IS NULL OR completed_at < ?completed_to)
AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit`),
	IDsLock: kit.Inline(`SELECT id, status FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
AND (?completed_to IS NULL OR completed_at < ?completed_to)
AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)
AND id > ?after ORDER BY id LIMIT ?limit FOR UPDATE`),
	Tally: kit.Inline(`SELECT status, COUNT(*) AS n, MAX(id) AS max_id FROM {dead_letters}
WHERE ?none = 0
AND (?any_id = 1 OR id IN (?ids)) AND (?any_partition = 1 OR partition_id IN (?pids))
AND (?any_status = 1 OR status IN (?statuses)) AND (?payload_type = '' OR payload_type = ?payload_type)
AND (?message_id IS NULL OR message_id = ?message_id)
AND (?failed_from IS NULL OR failed_at >= ?failed_from) AND (?failed_to IS NULL OR failed_at < ?failed_to)
AND (?completed_to IS NULL OR completed_at < ?completed_to)
AND (?error_text = '' OR LOCATE(CAST(?error_text AS BINARY), CAST(last_error AS BINARY)) > 0)
AND (?headers IS NULL OR JSON_CONTAINS(headers, ?headers)) AND (?max_id = 0 OR id <= ?max_id)
GROUP BY status`),
	// Conditioned on the status read under the lock: of two operators one wins.
	SetStatus: kit.Inline(`UPDATE {dead_letters} SET status = ?to, note = COALESCE(?note, note),
completed_at = CASE WHEN ?final = 1 THEN UTC_TIMESTAMP(6) END
WHERE id IN (?ids) AND status = ?from`),
	// The CAST keeps the column's type whatever the CASE's arms infer.
	SetReplayed: kit.Inline(`UPDATE {dead_letters} SET status = ?to, replay_id = CAST(CASE id ?cases END AS BINARY(16))
WHERE id IN (?ids) AND status = ?from`,
		kit.List{Name: "cases", Item: `WHEN ?id THEN ?replay_id`, Sep: " "}),
	Delete: kit.Inline(`DELETE FROM {dead_letters} WHERE id IN (?ids)`),
}

// DeadLetterList lists the letters a filter matches, in id order.
func (d *mysqlDialect) DeadLetterList(ctx context.Context, p *dialect.DeadLetterListParams) ([]dialect.DeadLetterRecord, error) {
	return deadLetterSQL.Read(ctx, d.Runner, p)
}

// DeadLetterTally counts the letters a filter matches, by status.
func (d *mysqlDialect) DeadLetterTally(ctx context.Context, p *dialect.DeadLetterTallyParams) (dialect.DeadLetterTally, error) {
	return deadLetterSQL.Count(ctx, d.Runner, p)
}

// DeadLetterUpdate moves letters still in p.From to p.To on p.Conn.
func (d *mysqlDialect) DeadLetterUpdate(ctx context.Context, p *dialect.DeadLetterUpdateParams) (int, error) {
	return deadLetterSQL.Move(ctx, d.Runner, p)
}

// DeadLetterDelete deletes letters by id on p.Conn.
func (d *mysqlDialect) DeadLetterDelete(ctx context.Context, p *dialect.DeadLetterDeleteParams) (int, error) {
	return deadLetterSQL.Remove(ctx, d.Runner, p)
}
