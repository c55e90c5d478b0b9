CREATE TABLE IF NOT EXISTS seqbox_schema_version (
    version INTEGER NOT NULL PRIMARY KEY
);

-- Hot rows (partitions, processor, vacuum_counter) are updated on every batch:
-- a low fillfactor leaves room for HOT updates.
CREATE TABLE IF NOT EXISTS seqbox_partitions (
    id BIGSERIAL PRIMARY KEY,
    queue VARCHAR(64) NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_body (
    id BYTEA PRIMARY KEY,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- No foreign key to partitions: it would make every producer hold a share
-- lock on the partition row that the sequencer locks (docs/ARCHITECTURE.md, "Tables and locks").
CREATE TABLE IF NOT EXISTS seqbox_incoming (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    body_id BYTEA NOT NULL
);

CREATE INDEX IF NOT EXISTS seqbox_incoming_partition_id ON seqbox_incoming (partition_id, id);

CREATE TABLE IF NOT EXISTS seqbox_outgoing (
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body_id BYTEA NOT NULL,
    sequenced_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, seq)
);

CREATE INDEX IF NOT EXISTS seqbox_outgoing_body_id ON seqbox_outgoing (body_id);

CREATE TABLE IF NOT EXISTS seqbox_processor (
    partition_id BIGINT PRIMARY KEY,
    processed_seq BIGINT NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMPTZ NULL,
    locked_by VARCHAR(128) NULL,
    locked_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_vacuum_counter (
    partition_id BIGINT PRIMARY KEY,
    counter BIGINT NOT NULL DEFAULT 0
) WITH (fillfactor = 50);

CREATE TABLE IF NOT EXISTS seqbox_dead_letters (
    id BIGSERIAL PRIMARY KEY,
    partition_id BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    message_id BYTEA NOT NULL,
    payload_type VARCHAR(255) NOT NULL,
    payload BYTEA NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    failed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error TEXT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    status VARCHAR(16) NOT NULL DEFAULT 'pending',
    completed_at TIMESTAMPTZ NULL,
    deadline TIMESTAMPTZ NULL
);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_deadline ON seqbox_dead_letters (status, deadline);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_status_failed_at ON seqbox_dead_letters (status, failed_at);

-- Cost that stays flat (docs/ARCHITECTURE.md, "Tables and locks").
--
-- incoming.xid is the inserting transaction's id. The sequencer reads a
-- partition in (xid, id) order from a lower bound, partitions.incoming_xid,
-- below which every row is final and already moved: moved rows that no
-- vacuum may remove yet (a held snapshot, autovacuum off) are never scanned
-- again. Rows that exist before this migration read as xid 0, and every
-- bound starts at 0, so they are found first. Adding the column and its
-- default in one statement leaves no window in which a new row gets 0.
ALTER TABLE seqbox_incoming ADD COLUMN IF NOT EXISTS xid xid8 NOT NULL DEFAULT '0',
    ALTER COLUMN xid SET DEFAULT pg_current_xact_id();

CREATE INDEX IF NOT EXISTS seqbox_incoming_partition_xid ON seqbox_incoming (partition_id, xid, id);

DROP INDEX IF EXISTS seqbox_incoming_partition_id;

ALTER TABLE seqbox_partitions ADD COLUMN IF NOT EXISTS incoming_xid xid8 NOT NULL DEFAULT '0';

-- vacuum_counter.pruned_seq: every outgoing row at or below it is deleted.
-- Vacuum starts each sweep there (no MIN(seq) over dead index entries) and
-- acks no longer touch this row. The counter column is no longer used.
ALTER TABLE seqbox_vacuum_counter ADD COLUMN IF NOT EXISTS pruned_seq BIGINT NOT NULL DEFAULT 0;

UPDATE seqbox_vacuum_counter v SET pruned_seq = COALESCE(
    (SELECT MIN(o.seq) - 1 FROM seqbox_outgoing o WHERE o.partition_id = v.partition_id),
    (SELECT p.processed_seq FROM seqbox_processor p WHERE p.partition_id = v.partition_id), 0)
WHERE pruned_seq = 0;

-- Autovacuum must never truncate the hot tables: truncation holds an
-- ACCESS EXCLUSIVE lock that stalls every seqbox statement on the table
-- (seen as statements timing out behind wait event VacuumTruncate). The
-- space stays in the file and is reused by the next inserts.
ALTER TABLE seqbox_incoming SET (vacuum_truncate = off);

ALTER TABLE seqbox_outgoing SET (vacuum_truncate = off);

ALTER TABLE seqbox_body SET (vacuum_truncate = off);

-- Dead letters an operator acts on (docs/ARCHITECTURE.md, "Dead letters"):
-- note is the operator's note (resolve) or reason (discard); replay_id is
-- the id of the copy a replay enqueued, found again when that copy is acked.
ALTER TABLE seqbox_dead_letters ADD COLUMN IF NOT EXISTS note TEXT NULL,
    ADD COLUMN IF NOT EXISTS replay_id BYTEA NULL;

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_replay_id ON seqbox_dead_letters (replay_id);

CREATE INDEX IF NOT EXISTS seqbox_dead_letters_partition ON seqbox_dead_letters (partition_id, id);

-- Autovacuum truncating a table takes an ACCESS EXCLUSIVE lock. 002 turned
-- truncation off on the large hot tables; the small ones are updated on
-- every move, lease and ack and truncate just as often: a soak with
-- autovacuum on stalled the whole pipeline while autovacuum truncated
-- partitions (wait event VacuumTruncate; docs/ARCHITECTURE.md, "Cost that
-- stays flat").
ALTER TABLE seqbox_partitions SET (vacuum_truncate = off);

ALTER TABLE seqbox_processor SET (vacuum_truncate = off);

ALTER TABLE seqbox_vacuum_counter SET (vacuum_truncate = off);

-- A queue with the Park failure policy stops a partition at a head that
-- exhausted its attempts: parked_at marks it, and no process leases it
-- until an operator resumes or skips it (docs/ARCHITECTURE.md, "Failure
-- policy: dead-letter or park").
ALTER TABLE seqbox_processor ADD COLUMN IF NOT EXISTS parked_at TIMESTAMPTZ NULL;

-- A message's Key is stored with it and handed to handlers (Delivery.Key),
-- so a relay can use it as a broker's partition or routing key; a dead
-- letter keeps it and its replay carries it. Bytes, as Go strings are.
ALTER TABLE seqbox_body ADD COLUMN IF NOT EXISTS msg_key BYTEA NULL;

ALTER TABLE seqbox_dead_letters ADD COLUMN IF NOT EXISTS msg_key BYTEA NULL;

-- Idempotent enqueue (docs/ARCHITECTURE.md, "Idempotent enqueue"): one row
-- per queue and dedup key while the key's window lasts, written in the
-- producer's transaction before its message. The primary key is what two
-- producers racing on one key wait on; expires_at is what the vacuum
-- prunes by and what lets a later producer take an expired key over.
CREATE TABLE IF NOT EXISTS seqbox_dedup_keys (
    queue VARCHAR(64) NOT NULL,
    dedup_key BYTEA NOT NULL,
    message_id BYTEA NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

CREATE INDEX IF NOT EXISTS seqbox_dedup_keys_expires_at ON seqbox_dedup_keys (expires_at);

ALTER TABLE seqbox_dedup_keys SET (vacuum_truncate = off);

-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler. A constant
-- default: no table rewrite.
ALTER TABLE seqbox_outgoing ADD COLUMN IF NOT EXISTS purged SMALLINT NOT NULL DEFAULT 0;

-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
ALTER TABLE seqbox_processor ADD COLUMN IF NOT EXISTS lease_limit INTEGER NULL;

-- Purges that made tombstones in the partition: a lease statement whose
-- snapshot predates one re-reads its batch (docs/ARCHITECTURE.md, "Purge").
ALTER TABLE seqbox_processor ADD COLUMN IF NOT EXISTS purges BIGINT NOT NULL DEFAULT 0;

-- A dead letter is found by its message id (DeadLetters.Get, `seqbox dlq
-- show`, the web UI's links by message id): by index, not by a scan.
CREATE INDEX IF NOT EXISTS seqbox_dead_letters_message_id ON seqbox_dead_letters (message_id);

-- The last seq handed out is the top of outgoing (docs/ARCHITECTURE.md,
-- "Tables and locks"); partitions.sequence is no longer kept. Dropping it
-- makes a process of an earlier release, which would still number from it
-- and could hand out pruned seqs again, fail loudly instead.
ALTER TABLE seqbox_partitions DROP COLUMN IF EXISTS sequence;

-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become LIST-partitioned by a generation, gen 0..2, one
-- partition each: seqbox_body_g0..2, seqbox_outgoing_g0..2. Statements that read
-- the parents keep their text; a generation whose every message is acked
-- is truncated whole instead of deleted row by row.
--
-- The existing tables become generation 0, rows and indexes as they are:
-- renamed, given gen (a constant default: no rewrite) and attached. The
-- attach reads the table once to check gen = 0, under the lock the whole
-- migration holds. Keys stay per partition and without gen, (id) and
-- (partition_id, seq): a key on the parent would have to include gen, and
-- within a partition gen is one value, so the key a partition has is the
-- same key, smaller, and generation 0 keeps the index it has. A seq is
-- unique across generations because moves allocate under the partition
-- lock and read the top of all three after it (docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- One DO block, so one statement and one transaction: a migration that
-- dies half-way leaves the old tables as they were and runs again whole.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('seqbox_body')) THEN
        ALTER TABLE seqbox_body RENAME TO seqbox_body_g0;
        ALTER TABLE seqbox_body_g0 ADD COLUMN gen SMALLINT NOT NULL DEFAULT 0;
        CREATE TABLE seqbox_body (LIKE seqbox_body_g0 INCLUDING DEFAULTS) PARTITION BY LIST (gen);
        ALTER TABLE seqbox_body ATTACH PARTITION seqbox_body_g0 FOR VALUES IN (0);
        CREATE TABLE seqbox_body_g1 PARTITION OF seqbox_body (PRIMARY KEY (id)) FOR VALUES IN (1) WITH (vacuum_truncate = off);
        CREATE TABLE seqbox_body_g2 PARTITION OF seqbox_body (PRIMARY KEY (id)) FOR VALUES IN (2) WITH (vacuum_truncate = off);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('seqbox_outgoing')) THEN
        ALTER TABLE seqbox_outgoing RENAME TO seqbox_outgoing_g0;
        ALTER TABLE seqbox_outgoing_g0 ADD COLUMN gen SMALLINT NOT NULL DEFAULT 0;
        CREATE TABLE seqbox_outgoing (LIKE seqbox_outgoing_g0 INCLUDING DEFAULTS) PARTITION BY LIST (gen);
        ALTER TABLE seqbox_outgoing ATTACH PARTITION seqbox_outgoing_g0 FOR VALUES IN (0);
        CREATE TABLE seqbox_outgoing_g1 PARTITION OF seqbox_outgoing (PRIMARY KEY (partition_id, seq)) FOR VALUES IN (1) WITH (vacuum_truncate = off);
        CREATE TABLE seqbox_outgoing_g2 PARTITION OF seqbox_outgoing (PRIMARY KEY (partition_id, seq)) FOR VALUES IN (2) WITH (vacuum_truncate = off);
        -- On the parent, so every generation has it; generation 0's
        -- existing index is attached, not built again.
        CREATE INDEX seqbox_outgoing_body ON seqbox_outgoing (body_id);
    END IF;
END
$$;

-- The generation of a message's body, which its outgoing row takes when
-- it is moved: a generation's bodies and outgoing rows are truncated
-- together. Existing rows' bodies are in generation 0.
ALTER TABLE seqbox_incoming ADD COLUMN IF NOT EXISTS body_gen SMALLINT NOT NULL DEFAULT 0;

-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses in every process (docs/ARCHITECTURE.md, "Vacuum").
CREATE TABLE IF NOT EXISTS seqbox_generations (
    gen SMALLINT PRIMARY KEY,
    state VARCHAR(8) NOT NULL,
    opened_at TIMESTAMPTZ NULL,
    closed_at TIMESTAMPTZ NULL,
    truncated_at TIMESTAMPTZ NULL,
    prune_held_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50, vacuum_truncate = off);

INSERT INTO seqbox_generations (gen, state, opened_at) VALUES (0, 'current', now()), (1, 'empty', NULL), (2, 'empty', NULL)
ON CONFLICT (gen) DO NOTHING;

-- The partition a message was enqueued to, kept with its body: whether a
-- message is still pending is read from its partition's backlog (incoming
-- from the bound, outgoing above the cursor) instead of from an index of
-- every outgoing row's body id, which cost the move as much as the rest
-- of its INSERT (docs/ARCHITECTURE.md, "Which messages are pending"). Bodies written
-- before this migration have none and are looked up as before, without
-- the index.
ALTER TABLE seqbox_body ADD COLUMN IF NOT EXISTS partition_id BIGINT NULL;

DROP INDEX IF EXISTS seqbox_outgoing_body;

DROP INDEX IF EXISTS seqbox_outgoing_body_id;

-- incoming's id orders a transaction's rows (the sequencer reads each
-- partition by (partition_id, xid, id)); nothing looks a row up by id
-- alone: the move deletes by ctid, and a purge by id within its partition.
-- The primary key's index cost every enqueued row an insert into a second
-- index and the cleanup of the moved rows' entries in it: about 4 of the
-- 14 µs of server time the incoming INSERT took per row (docs/ARCHITECTURE.md,
-- "Tables and locks"). The prefix is at most 32 characters, so the
-- constraint's name is never truncated.
ALTER TABLE seqbox_incoming DROP CONSTRAINT IF EXISTS seqbox_incoming_pkey;

-- A table without a primary key has no replica identity, and a publication
-- that publishes deletes (FOR ALL TABLES: CDC, an upgrade by logical
-- replication) would make every move's DELETE fail. FULL names the whole
-- row instead; it adds to the WAL only under wal_level = logical, and an
-- incoming row is about 60 bytes.
ALTER TABLE seqbox_incoming REPLICA IDENTITY FULL;

-- The move's lower bound leaves the partitions row (docs/ARCHITECTURE.md,
-- "Cost that stays flat"). partitions.incoming_xid was rewritten by every
-- move that advanced it: a new version of the row each time, which a held
-- snapshot keeps, and every later lock or read of the row walked them all.
-- Now each bound is a row of seqbox_partitions_bound, keyed (partition_id, xid):
-- a move inserts the new one and deletes the one it read, and the current
-- bound is the highest key, found by a backward probe of the primary key
-- that stops at the first row, however many deleted ones lie below it.
-- The old column stays: a process of an earlier release still running
-- reads and advances it; a bound of either is a lower bound (every row
-- below it moved, for good), so each side only reads a little more.
CREATE TABLE IF NOT EXISTS seqbox_partitions_bound (
    partition_id BIGINT NOT NULL,
    xid xid8 NOT NULL,
    PRIMARY KEY (partition_id, xid)
);

INSERT INTO seqbox_partitions_bound (partition_id, xid)
SELECT id, incoming_xid FROM seqbox_partitions WHERE incoming_xid <> '0'::xid8
ON CONFLICT DO NOTHING;

-- The processor row is versioned (docs/ARCHITECTURE.md, "Cost that stays
-- flat"). Every lease and ack rewrote it in place: a heap-only update,
-- found through the row's first index entry and a walk of every version
-- after it. Under a held snapshot no version can be pruned, and each
-- lookup of the row walked all those made since the snapshot began. Now
-- every write sets version = version + 1, and version is in the primary
-- key: each version has its own index entry, and the current row (the
-- highest version) is found by a backward probe of the key, which stops
-- at the first row it can see.
--
-- A process of an earlier release still running updates the row in place
-- by partition_id alone, which stays correct: only one version of a
-- partition's row is ever visible. The column has no default once added,
-- so that an earlier release registering queues (a version-0 row beside a
-- current one) fails instead of adding a second row.
ALTER TABLE seqbox_processor ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 0;

ALTER TABLE seqbox_processor ALTER COLUMN version DROP DEFAULT;

-- One statement: a migration that dies half-way leaves the old key.
ALTER TABLE seqbox_processor DROP CONSTRAINT IF EXISTS seqbox_processor_pkey,
    ADD CONSTRAINT seqbox_processor_pkey PRIMARY KEY (partition_id, version);
