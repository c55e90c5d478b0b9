CREATE TABLE IF NOT EXISTS seqbox_schema_version (
    version INTEGER NOT NULL PRIMARY KEY
);

-- Timestamps are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC from strftime, so that
-- lease and retry comparisons are plain string comparisons.
CREATE TABLE IF NOT EXISTS seqbox_partitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence INTEGER NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
);

CREATE TABLE IF NOT EXISTS seqbox_body (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL
);

-- A plain rowid key: SQLite has one writer, so rowid order is commit order.
CREATE TABLE IF NOT EXISTS seqbox_incoming (
    id INTEGER PRIMARY KEY,
    partition_id INTEGER NOT NULL,
    body_id BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS seqbox_incoming_partition_id ON seqbox_incoming (partition_id, id);

CREATE TABLE IF NOT EXISTS seqbox_outgoing (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS seqbox_outgoing_body_id ON seqbox_outgoing (body_id);

CREATE TABLE IF NOT EXISTS seqbox_processor (
    partition_id INTEGER NOT NULL PRIMARY KEY,
    processed_seq INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMP NULL,
    locked_by TEXT NULL,
    locked_until TIMESTAMP NULL
);

CREATE TABLE IF NOT EXISTS seqbox_vacuum_counter (
    partition_id INTEGER NOT NULL PRIMARY KEY,
    counter INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS seqbox_dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    message_id BLOB NOT NULL,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    failed_at TIMESTAMP NOT NULL,
    last_error TEXT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    completed_at TIMESTAMP NULL,
    deadline TIMESTAMP NULL
);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_deadline ON seqbox_dead_letters (status, deadline);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_failed_at ON seqbox_dead_letters (status, failed_at);

-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there and acks no longer touch this row; the
-- counter column is no longer used (docs/ARCHITECTURE.md, "Vacuum").
-- SQLite has no ADD COLUMN IF NOT EXISTS; it needs none: migrations run
-- inside the BEGIN IMMEDIATE that serialises them, with the version record,
-- so this one commits whole or not at all.
ALTER TABLE seqbox_vacuum_counter ADD COLUMN pruned_seq INTEGER NOT NULL DEFAULT 0;

UPDATE seqbox_vacuum_counter SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM seqbox_outgoing o WHERE o.partition_id = seqbox_vacuum_counter.partition_id),
    (SELECT p.processed_seq FROM seqbox_processor p WHERE p.partition_id = seqbox_vacuum_counter.partition_id), 0)
WHERE pruned_seq = 0;

-- Dead letters an operator acts on (docs/ARCHITECTURE.md, "Dead letters"):
-- note is the operator's note (resolve) or reason (discard); replay_id is
-- the id of the copy a replay enqueued, found again when that copy is acked.
ALTER TABLE seqbox_dead_letters ADD COLUMN note TEXT NULL;

ALTER TABLE seqbox_dead_letters ADD COLUMN replay_id BLOB NULL;

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_replay_id ON seqbox_dead_letters (replay_id);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_partition ON seqbox_dead_letters (partition_id, id);

-- A queue with the Park failure policy stops a partition at a head that
-- exhausted its attempts: parked_at marks it, and no process leases it
-- until an operator resumes or skips it (docs/ARCHITECTURE.md, "Failure
-- policy: dead-letter or park").
ALTER TABLE seqbox_processor ADD COLUMN parked_at TIMESTAMP NULL;

-- A message's Key is stored with it and handed to handlers (Delivery.Key),
-- so a relay can use it as a broker's partition or routing key; a dead
-- letter keeps it and its replay carries it. Bytes, as Go strings are.
ALTER TABLE seqbox_body ADD COLUMN msg_key BLOB NULL;

ALTER TABLE seqbox_dead_letters ADD COLUMN msg_key BLOB NULL;

-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS seqbox_dedup_keys (
    queue TEXT NOT NULL,
    dedup_key BLOB NOT NULL,
    message_id BLOB NOT NULL,
    expires_at TIMESTAMP NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

CREATE INDEX IF NOT EXISTS seqbox_dedup_keys_expires_at ON seqbox_dedup_keys (expires_at);

-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler.
ALTER TABLE seqbox_outgoing ADD COLUMN purged INTEGER NOT NULL DEFAULT 0;

-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
ALTER TABLE seqbox_processor ADD COLUMN lease_limit INTEGER NULL;

-- Purges that made tombstones in the partition (read back by PostgreSQL's
-- one-statement leases; kept on every database so the purge is one SQL).
ALTER TABLE seqbox_processor ADD COLUMN purges INTEGER NOT NULL DEFAULT 0;

-- A dead letter is found by its message id (DeadLetters.Get, `seqbox dlq
-- show`, the web UI's links by message id): by index, not by a scan.
CREATE INDEX IF NOT EXISTS seqbox_dead_letters_message_id ON seqbox_dead_letters (message_id);

-- The last seq handed out is the top of outgoing (docs/ARCHITECTURE.md,
-- "Tables and locks"); partitions.sequence is no longer kept. Dropping it
-- makes a process of an earlier release, which would still number from it
-- and could hand out pruned seqs again, fail loudly instead.
ALTER TABLE seqbox_partitions DROP COLUMN sequence;

-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become three generations of separate tables,
-- seqbox_body_g0, seqbox_body_g1, seqbox_body_g2 and seqbox_outgoing_g0, … seqbox_outgoing_g2; every
-- statement names the ones it reads (SQLite has no partitioned tables). A
-- generation whose every message is acked is emptied by a DELETE without
-- WHERE, which SQLite runs as a truncation, instead of row by row.
--
-- The existing tables become generation 0 by a RENAME: no copy, rows and
-- indexes stay (the index keeps its name, seqbox_outgoing_body_id; index names
-- are per database, so generations 1 and 2 name theirs after their own
-- tables). Keys stay per table, (id) and (partition_id, seq): a seq is
-- unique across generations because moves allocate under the write lock
-- and read the top of all three after it. A RENAME cannot be made
-- conditional, so this migration is not safe to run twice: it runs whole
-- or not at all, in the transaction that applies every migration with its
-- version record (schema.go: a failed run rolls back).
ALTER TABLE seqbox_body RENAME TO seqbox_body_g0;

ALTER TABLE seqbox_outgoing RENAME TO seqbox_outgoing_g0;

-- Generation 0's columns as migrations 001 to 009 left them, in their order.
CREATE TABLE IF NOT EXISTS seqbox_body_g1 (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    msg_key BLOB NULL
);

CREATE TABLE IF NOT EXISTS seqbox_body_g2 (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    msg_key BLOB NULL
);

CREATE TABLE IF NOT EXISTS seqbox_outgoing_g1 (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    purged INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS seqbox_outgoing_g1_body_id ON seqbox_outgoing_g1 (body_id);

CREATE TABLE IF NOT EXISTS seqbox_outgoing_g2 (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    purged INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS seqbox_outgoing_g2_body_id ON seqbox_outgoing_g2 (body_id);

-- seqbox_body and seqbox_outgoing stay, as views of the three generations, for an
-- operator reading by hand; seqbox's own statements never read them.
CREATE VIEW IF NOT EXISTS seqbox_body AS
SELECT id, msg_key, payload_type, payload, headers, created_at, 0 AS gen FROM seqbox_body_g0
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 1 AS gen FROM seqbox_body_g1
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 2 AS gen FROM seqbox_body_g2;

CREATE VIEW IF NOT EXISTS seqbox_outgoing AS
SELECT partition_id, seq, body_id, sequenced_at, purged, 0 AS gen FROM seqbox_outgoing_g0
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 1 AS gen FROM seqbox_outgoing_g1
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 2 AS gen FROM seqbox_outgoing_g2;

-- The generation of a message's body, which its outgoing row takes when it
-- is moved: a generation's bodies and outgoing rows are emptied together.
-- Existing rows' bodies are in generation 0. A constant default: SQLite
-- adds the column without rewriting a row.
ALTER TABLE seqbox_incoming ADD COLUMN body_gen INTEGER NOT NULL DEFAULT 0;

-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses (docs/ARCHITECTURE.md, "Vacuum"). Times are TEXT
-- 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as every time of this schema.
CREATE TABLE IF NOT EXISTS seqbox_generations (
    gen INTEGER NOT NULL PRIMARY KEY,
    state TEXT NOT NULL,
    opened_at TIMESTAMP NULL,
    closed_at TIMESTAMP NULL,
    truncated_at TIMESTAMP NULL,
    prune_held_until TIMESTAMP NULL
);

INSERT OR IGNORE INTO seqbox_generations (gen, state, opened_at) VALUES
    (0, 'current', strftime('%Y-%m-%d %H:%M:%f', 'now')), (1, 'empty', NULL), (2, 'empty', NULL);
