-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become LIST-partitioned by a generation, gen 0..2, one
-- partition each: {body}_g0..2, {outgoing}_g0..2. Statements that read
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
    IF NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('{body}')) THEN
        ALTER TABLE {body} RENAME TO {body}_g0;
        ALTER TABLE {body}_g0 ADD COLUMN gen SMALLINT NOT NULL DEFAULT 0;
        CREATE TABLE {body} (LIKE {body}_g0 INCLUDING DEFAULTS) PARTITION BY LIST (gen);
        ALTER TABLE {body} ATTACH PARTITION {body}_g0 FOR VALUES IN (0);
        CREATE TABLE {body}_g1 PARTITION OF {body} (PRIMARY KEY (id)) FOR VALUES IN (1) WITH (vacuum_truncate = off);
        CREATE TABLE {body}_g2 PARTITION OF {body} (PRIMARY KEY (id)) FOR VALUES IN (2) WITH (vacuum_truncate = off);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('{outgoing}')) THEN
        ALTER TABLE {outgoing} RENAME TO {outgoing}_g0;
        ALTER TABLE {outgoing}_g0 ADD COLUMN gen SMALLINT NOT NULL DEFAULT 0;
        CREATE TABLE {outgoing} (LIKE {outgoing}_g0 INCLUDING DEFAULTS) PARTITION BY LIST (gen);
        ALTER TABLE {outgoing} ATTACH PARTITION {outgoing}_g0 FOR VALUES IN (0);
        CREATE TABLE {outgoing}_g1 PARTITION OF {outgoing} (PRIMARY KEY (partition_id, seq)) FOR VALUES IN (1) WITH (vacuum_truncate = off);
        CREATE TABLE {outgoing}_g2 PARTITION OF {outgoing} (PRIMARY KEY (partition_id, seq)) FOR VALUES IN (2) WITH (vacuum_truncate = off);
        -- On the parent, so every generation has it; generation 0's
        -- existing index is attached, not built again.
        CREATE INDEX {outgoing}_body ON {outgoing} (body_id);
    END IF;
END
$$
-- seqbox:split
-- The generation of a message's body, which its outgoing row takes when
-- it is moved: a generation's bodies and outgoing rows are truncated
-- together. Existing rows' bodies are in generation 0.
ALTER TABLE {incoming} ADD COLUMN IF NOT EXISTS body_gen SMALLINT NOT NULL DEFAULT 0
-- seqbox:split
-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses in every process (docs/ARCHITECTURE.md, "Vacuum").
CREATE TABLE IF NOT EXISTS {generations} (
    gen SMALLINT PRIMARY KEY,
    state VARCHAR(8) NOT NULL,
    opened_at TIMESTAMPTZ NULL,
    closed_at TIMESTAMPTZ NULL,
    truncated_at TIMESTAMPTZ NULL,
    prune_held_until TIMESTAMPTZ NULL
) WITH (fillfactor = 50, vacuum_truncate = off)
-- seqbox:split
INSERT INTO {generations} (gen, state, opened_at) VALUES (0, 'current', now()), (1, 'empty', NULL), (2, 'empty', NULL)
ON CONFLICT (gen) DO NOTHING
