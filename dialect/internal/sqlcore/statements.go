package sqlcore

// The portable statements: the SQL of every operation that has one form on
// all three databases, in one place. {name} words are tables or the
// dialect's fixed fragments (see Expander and the fragment keys below);
// values are ? placeholders. An operation a dialect shapes its own way has
// its SQL in that dialect's package, next to the method that runs it.
//
// Fragments each dialect supplies:
//
//	now                 the current time by the database clock, in UTC
//	now_plus            now + ? microseconds (one bound value)
//	insert_ignore       the head of an INSERT that skips duplicate keys
//	insert_ignore_tail  its end
//	partition_lock      appended to the sequencer's partition-row SELECT
//	read_setup          a side-effect-only condition in that SELECT that
//	                    tunes the rest of the move's transaction, or ""
//	row_lock            appended to a processor or vacuum row SELECT
//	delete_incoming     the whole statement deleting the incoming rows a
//	                    move read, by exact id, from one list value (?)
//	incoming_pending    a condition on incoming i (joined to partitions pa)
//	                    true for every row that may still need a move; a
//	                    dialect that keeps a lower bound (PostgreSQL) skips
//	                    moved rows a vacuum has not removed yet
//	incoming_order      the order moves take rows in (the FIFO order)
//	bigint_type         the type a 64-bit integer parameter is cast to, so
//	                    that a bound value needs no type inference
//	row_lock_wait       row_lock without SKIP LOCKED: wait for the row
//	time_value          a bound time value (?) as stored columns compare with it
//	message_id_type     the type of a message id column, for a CAST
//	table_exists        a count of the tables named ? in the current schema
//	body_of_o           the body row (as b) of outgoing row o, joined so that
//	                    o is read first and body probed by primary key on
//	                    any statistics; body_of_i the same for incoming i
//	header_match        a condition: body b's headers hold the name ? with
//	                    the value ? (two bound values)
//	dedup_upsert        the tail of the dedup-key INSERT: take an expired
//	                    key over in place, leave an unexpired one alone
//	dead_letter_returning " RETURNING id, partition_id, seq" where an
//	                    INSERT can return the rows it wrote, else ""
//	dedup_returning     " RETURNING dedup_key" where an upsert can return
//	                    the rows it wrote, else ""
//	dedup_holders       the whole statement reading the holders of keys
//	                    (?, Flavor.DedupKeyList) of queue ?, locking them
//	dedup_expire        the whole statement deleting up to ? expired keys
//	async_commit        a condition, always true, that makes the statement's
//	                    transaction commit without waiting for its log
//	                    flush (PostgreSQL), or ""
const (
	// fragmentParkedAt is parked_at's new value in an outcome: now when it
	// parks the partition (?park > 0), else NULL.
	fragmentParkedAt = "CASE WHEN CAST(?park AS {bigint_type}) > 0 THEN {now} END"

	// leasable is the one definition of "not parked, no live lease and no
	// retry pending"; the ready poll, the leases and the row lock share it.
	fragmentLeasable = "parked_at IS NULL AND (locked_until IS NULL OR locked_until < {now}) " +
		"AND (next_attempt_at IS NULL OR next_attempt_at <= {now})"

	stmtSchemaVersion      = "SELECT COALESCE(MAX(version), 0) FROM {schema_version}"
	stmtSchemaRecord       = "INSERT INTO {schema_version} (version) VALUES (?)"
	stmtSchemaTableExists  = "{table_exists}"
	stmtDropTable          = "DROP TABLE IF EXISTS ?" // the name from Tables.All, as bun.Ident
	stmtPartitionRows      = "SELECT id, partition_no FROM {partitions} WHERE queue = ? ORDER BY partition_no"
	stmtRegisterPartitions = "{insert_ignore} INTO {partitions} (queue, partition_no) VALUES ? {insert_ignore_tail}"
	stmtRegisterProcessor  = "{insert_ignore} INTO {processor} (partition_id) VALUES ? {insert_ignore_tail}"
	stmtRegisterVacuum     = "{insert_ignore} INTO {vacuum_counter} (partition_id) VALUES ? {insert_ignore_tail}"

	stmtInsertBody      = "INSERT INTO {body} (id, msg_key, payload_type, payload, headers, created_at) VALUES ?"
	stmtBodyRow         = "(?, ?, ?, ?, ?, {now})"
	stmtInsertIncoming  = "INSERT INTO {incoming} (partition_id, body_id) VALUES ?"
	stmtPendingMessages = "SELECT b.id FROM {body} b LEFT JOIN {outgoing} o ON o.body_id = b.id " +
		"LEFT JOIN {processor} p ON p.partition_id = o.partition_id " +
		"WHERE b.id IN (?) AND (o.seq IS NULL OR o.seq > p.processed_seq)"

	// One index probe per partition: DISTINCT over incoming reads the
	// whole backlog, and on PostgreSQL every dead row not yet vacuumed.
	stmtIncomingPartitions = "SELECT pa.id FROM {partitions} pa WHERE EXISTS (SELECT 1 FROM {incoming} i WHERE i.partition_id = pa.id AND {incoming_pending})"
	stmtLockPartition      = "SELECT sequence FROM {partitions} WHERE id = ?{read_setup}{partition_lock}"
	stmtLockPartitions     = "SELECT id, sequence FROM {partitions} WHERE id IN (?) ORDER BY id{partition_lock}"
	// One partition's head of line, as a derived table: the read of a
	// several-partition move is one UNION ALL of these (LIMIT inside a
	// compound SELECT needs the derived table on SQLite and MySQL).
	stmtSelectIncomingPart = "SELECT * FROM (SELECT partition_id, id, body_id FROM {incoming} WHERE partition_id = ? ORDER BY id LIMIT ?) AS h?"
	stmtSetSequences       = "UPDATE {partitions} SET sequence = CASE id ? END WHERE id IN (?)"
	stmtSelectIncoming     = "SELECT id, body_id FROM {incoming} WHERE partition_id = ? ORDER BY id LIMIT ?"
	stmtSetSequence        = "UPDATE {partitions} SET sequence = ? WHERE id = ?"
	stmtInsertOutgoing     = "INSERT INTO {outgoing} (partition_id, seq, body_id, sequenced_at) VALUES ?"
	stmtOutgoingRow        = "(?, ?, ?, {now})"

	stmtReadyList = "SELECT pr.partition_id FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id " +
		"WHERE pr.partition_id IN (?) AND pa.sequence > pr.processed_seq AND {leasable}"
	// attempts counts at acquire, so a crash before the ack leaves a trace;
	// the sub-select makes an empty partition never take a lease. Named
	// values: ?owner ?lease_us ?pid.
	stmtLease = "UPDATE {processor} SET locked_by = ?owner, locked_until = {now_plus_lease}, lease_limit = ?limit, attempts = attempts + 1 " +
		"WHERE partition_id = ?pid AND {leasable} " +
		"AND processed_seq < (SELECT sequence FROM {partitions} WHERE id = ?pid)"
	stmtLeaseReturning = stmtLease + " RETURNING processed_seq, attempts"
	stmtLeaseState     = "SELECT processed_seq, attempts FROM {processor} WHERE partition_id = ?pid AND locked_by = ?owner"
	stmtLockProcessor  = "SELECT processed_seq, attempts FROM {processor} WHERE partition_id = ?pid " +
		"AND parked_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= {now}) " +
		"AND processed_seq < (SELECT sequence FROM {partitions} WHERE id = ?pid){async_commit}{row_lock}"
	stmtOutgoingList = "SELECT o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at " +
		"FROM {outgoing} o {body_of_o} " +
		"WHERE o.partition_id = ?pid AND o.seq > ?after ORDER BY o.seq LIMIT ?limit"
	// next_attempt_at is set only for a retry (?retry_us > 0), parked_at
	// only to park (?park > 0): any other outcome clears it. Named values.
	stmtProcessorUpdate = "UPDATE {processor} SET processed_seq = ?seq, attempts = ?attempts, last_error = ?last_error, " +
		"next_attempt_at = CASE WHEN CAST(?retry_us AS {bigint_type}) > 0 THEN {now_plus_retry} END, " +
		"parked_at = " + fragmentParkedAt + ", locked_by = NULL, locked_until = NULL " +
		"WHERE partition_id = ?pid"
	stmtProcessorUpdateGuarded = stmtProcessorUpdate + " AND locked_by = ?owner"
	// Group leases and acks (processor.GroupLeaser): a few statements for
	// many partitions. Named values: ?pids (a list) ?owner ?cases, and
	// ?lease_us ?limit as CASE expressions of each partition's own value.
	// The row lock skips rows another transaction is leasing; rows come
	// back in partition order, the order every group locks them in.
	stmtGroupLockLeasable = "SELECT partition_id, processed_seq, attempts FROM {processor} " +
		"WHERE partition_id IN (?pids) AND {leasable} " +
		"AND processed_seq < (SELECT sequence FROM {partitions} pa WHERE pa.id = {processor}.partition_id) " +
		"ORDER BY partition_id{row_lock}"
	stmtGroupTakeLease = "UPDATE {processor} SET locked_by = ?owner, locked_until = {now_plus_lease}, lease_limit = ?limit, attempts = attempts + 1 " +
		"WHERE partition_id IN (?pids){async_commit}"
	// The acks wait for a row lock instead of skipping: the rows are ours
	// unless a lease expired, and a skip would read as a lost lease. The
	// sequence read with them tells which partitions have more after the
	// ack: it only grows, so "more" is never wrong, and a partition that
	// got more since is found by the next wake-up.
	stmtGroupLockOwned = "SELECT partition_id, (SELECT sequence FROM {partitions} pa WHERE pa.id = {processor}.partition_id) AS sequence " +
		"FROM {processor} WHERE partition_id IN (?pids) AND locked_by = ?owner ORDER BY partition_id{row_lock_wait}"
	stmtGroupAck = "UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, attempts = 0, last_error = NULL, " +
		"next_attempt_at = NULL, locked_by = NULL, locked_until = NULL WHERE partition_id IN (?pids){async_commit}"
	// The ack and the next lease of the partitions in ?more, as one new
	// version of each row: a lease taken by a second UPDATE made two, and
	// under a held snapshot every version stays in the chain each later
	// lookup walks (docs/ARCHITECTURE.md, "Cost that stays flat").
	stmtGroupAckLease = "UPDATE {processor} SET processed_seq = CASE partition_id ?cases END, last_error = NULL, next_attempt_at = NULL, " +
		"attempts = CASE WHEN partition_id IN (?more) THEN 1 ELSE 0 END, " +
		"locked_by = CASE WHEN partition_id IN (?more) THEN ?owner END, " +
		"locked_until = CASE WHEN partition_id IN (?more) THEN {now_plus_lease} END, " +
		"lease_limit = CASE WHEN partition_id IN (?more) THEN ?limit ELSE lease_limit END " +
		"WHERE partition_id IN (?pids){async_commit}"
	// A batch is a seq range: seqs are gap-free above processed_seq, so
	// "the next n" is (after, after+n]. Joined with UNION ALL, one per partition.
	stmtGroupReadPart = "SELECT o.partition_id, o.seq, o.body_id, o.purged, b.msg_key, b.payload_type, b.payload, b.headers, b.created_at " +
		"FROM {outgoing} o {body_of_o} WHERE o.partition_id = ? AND o.seq > ? AND o.seq <= ?"
	// Dead-letter actions (deadletter.Admin). The filter is one appender
	// (deadLetterWhere) whose every value goes through bun's placeholders.
	stmtDeadLetterList = "SELECT id, partition_id, seq, message_id, msg_key, payload_type, payload, headers, created_at, " +
		"failed_at, last_error, attempts, status, note, completed_at, replay_id FROM {dead_letters} " +
		"WHERE ? AND id > ? ORDER BY id LIMIT ?"
	stmtDeadLetterListLock = stmtDeadLetterList + "{row_lock_wait}"
	stmtDeadLetterIDs      = "SELECT id, status FROM {dead_letters} WHERE ? AND id > ? ORDER BY id LIMIT ?"
	stmtDeadLetterIDsLock  = stmtDeadLetterIDs + "{row_lock_wait}"
	stmtDeadLetterTally    = "SELECT status, COUNT(*) AS n FROM {dead_letters} WHERE ? GROUP BY status"
	// Conditioned on the status read under the lock: of two operators one wins.
	stmtDeadLetterSetStatus = "UPDATE {dead_letters} SET status = ?, note = COALESCE(?, note), " +
		"completed_at = CASE WHEN ? THEN {now} END WHERE id IN (?) AND status = ?"
	stmtDeadLetterSetReplayed = "UPDATE {dead_letters} SET status = ?, replay_id = CAST(CASE id ? END AS {message_id_type}) WHERE id IN (?) AND status = ?"
	stmtDeadLetterResolve     = "UPDATE {dead_letters} SET status = ?, completed_at = {now} WHERE status = ? AND replay_id IN (?)"
	stmtDeadLetterDelete      = "DELETE FROM {dead_letters} WHERE id IN (?)"
	stmtPartitionList         = "SELECT id, queue, partition_no FROM {partitions} ORDER BY queue, partition_no"
	stmtPartitionListQueue    = "SELECT id, queue, partition_no FROM {partitions} WHERE queue = ? ORDER BY partition_no"
	stmtInsertDeadLetters     = "INSERT INTO {dead_letters} (partition_id, seq, message_id, msg_key, payload_type, payload, headers, " +
		"created_at, failed_at, last_error, attempts, status) VALUES ?{dead_letter_returning}"
	// The letters an INSERT without RETURNING wrote, read back in its
	// transaction: the partitions' letters from its first id on. Their
	// processor rows are locked by the transaction, so no other letter of
	// theirs can appear meanwhile; ids need not be consecutive.
	stmtDeadLettersWritten = "SELECT id, partition_id, seq FROM {dead_letters} WHERE partition_id IN (?) AND id >= ? ORDER BY id"
	stmtDeadLetterRow      = "(?, ?, ?, ?, ?, ?, ?, ?, {now}, ?, ?, ?)"

	stmtVacuumCounters = "SELECT v.partition_id, v.pruned_seq, p.processed_seq FROM {vacuum_counter} v " +
		"JOIN {processor} p ON p.partition_id = v.partition_id WHERE p.processed_seq > v.pruned_seq"
	// Monotonic: overlapping sweeps of two processes never move it back.
	stmtSetPruned = "UPDATE {vacuum_counter} SET pruned_seq = ? WHERE partition_id = ? AND pruned_seq < ?"
	// The portable two-statement prune (SQLite; the others delete both in one).
	stmtVacuumBodies   = "DELETE FROM {body} WHERE id IN (SELECT body_id FROM {outgoing} WHERE partition_id = ? AND seq > ? AND seq <= ?)"
	stmtVacuumOutgoing = "DELETE FROM {outgoing} WHERE partition_id = ? AND seq > ? AND seq <= ?"

	stmtPartitionStats = "SELECT pa.id, pa.queue, pa.partition_no, pa.sequence, pr.processed_seq, pr.attempts, " +
		"pr.last_error, pr.locked_until, pr.next_attempt_at, pr.parked_at, " +
		// The head of the sequenced line, by primary key: seqs are gap-free
		// above processed_seq.
		"(SELECT b.created_at FROM {outgoing} o {body_of_o} " +
		"WHERE o.partition_id = pa.id AND o.seq = pr.processed_seq + 1) AS oldest_outgoing, " +
		"(SELECT COUNT(*) FROM {incoming} i WHERE i.partition_id = pa.id AND {incoming_pending}) AS incoming, " +
		// The head of the line, found through the index: MIN(created_at)
		// over the join read every row of a backlog (0.5 s per call measured
		// on PostgreSQL under load, dead tuples included).
		"(SELECT b.created_at FROM {incoming} i {body_of_i} WHERE i.partition_id = pa.id AND {incoming_pending} " +
		"ORDER BY {incoming_order} LIMIT 1) AS oldest_incoming " +
		"FROM {partitions} pa JOIN {processor} pr ON pr.partition_id = pa.id ORDER BY pa.queue, pa.partition_no"
	stmtDeadLetterCount = "SELECT partition_id, status, COUNT(*) AS n FROM {dead_letters} GROUP BY partition_id, status"

	// Parked and retrying partitions (seqbox.Partitions). The lock waits: an operator's
	// action queues behind another's, then sees the row as that one left it.
	// What an operator may act on (seqbox.Partitions): parked, or a failed
	// head waiting for its retry. leased is a lease not expired by the
	// database clock (a delivery may be in flight): the complement of
	// leasable's lease condition.
	stmtFailingList = "SELECT pa.id, pa.queue, pa.partition_no, pr.processed_seq, pr.attempts, pr.last_error, " +
		"pr.next_attempt_at, pr.parked_at, " +
		"CASE WHEN pr.locked_until IS NOT NULL AND pr.locked_until >= {now} THEN 1 ELSE 0 END AS leased " +
		"FROM {processor} pr JOIN {partitions} pa ON pa.id = pr.partition_id " +
		"WHERE pr.parked_at IS NOT NULL OR pr.next_attempt_at IS NOT NULL OR COALESCE(pr.last_error, '') <> '' " +
		"ORDER BY pa.queue, pa.partition_no"
	stmtAdminRead = "SELECT processed_seq, attempts, last_error, next_attempt_at, parked_at, " +
		"CASE WHEN locked_until IS NOT NULL AND locked_until >= {now} THEN 1 ELSE 0 END AS leased " +
		"FROM {processor} WHERE partition_id = ?"
	stmtAdminLock = stmtAdminRead + "{row_lock_wait}"
)

// allStatements lists every statement above, so that New can expand each
// one for the dialect at start-up: a missing fragment is an error from New,
// never a failure in the middle of the pipeline.
func allStatements() []string {
	return []string{
		stmtSchemaVersion,
		stmtSchemaRecord,
		stmtSchemaTableExists,
		stmtDropTable,
		stmtPartitionRows,
		stmtRegisterPartitions,
		stmtRegisterProcessor,
		stmtRegisterVacuum,
		stmtInsertBody,
		stmtBodyRow,
		stmtInsertIncoming,
		stmtPendingMessages,
		stmtIncomingPartitions,
		stmtLockPartition,
		stmtLockPartitions,
		stmtSelectIncomingPart,
		stmtSetSequences,
		stmtSelectIncoming,
		stmtSetSequence,
		stmtInsertOutgoing,
		stmtOutgoingRow,
		stmtReadyList,
		stmtLease,
		stmtLeaseReturning,
		stmtLeaseState,
		stmtLockProcessor,
		stmtOutgoingList,
		stmtProcessorUpdate,
		stmtProcessorUpdateGuarded,
		stmtInsertDeadLetters,
		stmtDeadLettersWritten,
		stmtGroupLockLeasable,
		stmtDeadLetterList,
		stmtDeadLetterListLock,
		stmtDeadLetterIDs,
		stmtDeadLetterIDsLock,
		stmtDeadLetterTally,
		stmtDeadLetterSetStatus,
		stmtDeadLetterSetReplayed,
		stmtDeadLetterResolve,
		stmtDeadLetterDelete,
		stmtPartitionList,
		stmtPartitionListQueue,
		stmtGroupTakeLease,
		stmtGroupLockOwned,
		stmtGroupAck,
		stmtGroupAckLease,
		stmtGroupReadPart,
		stmtDeadLetterRow,
		stmtVacuumCounters,
		stmtSetPruned,
		stmtVacuumBodies,
		stmtVacuumOutgoing,
		stmtPartitionStats,
		stmtDeadLetterCount,
		stmtFailingList,
		stmtAdminRead,
		stmtAdminLock,
		stmtDedupClaim,
		stmtDedupRow,
		stmtDedupHolders,
		stmtDedupExpire,
		stmtPurgeLockPartition,
		stmtPurgeLockProcessor,
		stmtPurgeReadProcessor,
		withMatches(stmtPurgeIncoming, 1),
		withMatches(stmtPurgeCountIncoming, 1),
		withMatches(stmtPurgeOutgoing, 1),
		withMatches(stmtPurgeCountOutgoing, 1),
		stmtPurgeDeleteIncoming,
		stmtPurgeDeleteBodies,
		stmtPurgeTombstone,
		stmtPurgeBlankBodies,
		stmtPurgeCount,
	}
}
