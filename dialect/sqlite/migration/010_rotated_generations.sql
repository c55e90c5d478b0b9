-- Tables rotated instead of pruned (docs/ROTATION.md; docs/ARCHITECTURE.md,
-- "Tables and locks").
--
-- body and outgoing become three generations of separate tables,
-- {body_g0}, {body_g1}, {body_g2} and {outgoing_g0}, … {outgoing_g2}; every
-- statement names the ones it reads (SQLite has no partitioned tables). A
-- generation whose every message is acked is emptied by a DELETE without
-- WHERE, which SQLite runs as a truncation, instead of row by row.
--
-- The existing tables become generation 0 by a RENAME: no copy, rows and
-- indexes stay (the index keeps its name, {outgoing}_body_id; index names
-- are per database, so generations 1 and 2 name theirs after their own
-- tables). Keys stay per table, (id) and (partition_id, seq): a seq is
-- unique across generations because moves allocate under the write lock
-- and read the top of all three after it. A RENAME cannot be made
-- conditional, so this migration is not safe to run twice: it runs whole
-- or not at all, in the transaction that applies every migration with its
-- version record (schema.go: a failed run rolls back).
ALTER TABLE {body} RENAME TO {body_g0}
-- seqbox:split
ALTER TABLE {outgoing} RENAME TO {outgoing_g0}
-- seqbox:split
-- Generation 0's columns as migrations 001 to 009 left them, in their order.
CREATE TABLE IF NOT EXISTS {body_g1} (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    msg_key BLOB NULL
)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {body_g2} (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL,
    msg_key BLOB NULL
)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing_g1} (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    purged INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID
-- seqbox:split
CREATE INDEX IF NOT EXISTS {outgoing_g1}_body_id ON {outgoing_g1} (body_id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {outgoing_g2} (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    purged INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID
-- seqbox:split
CREATE INDEX IF NOT EXISTS {outgoing_g2}_body_id ON {outgoing_g2} (body_id)
-- seqbox:split
-- {body} and {outgoing} stay, as views of the three generations, for an
-- operator reading by hand; seqbox's own statements never read them.
CREATE VIEW IF NOT EXISTS {body} AS
SELECT id, msg_key, payload_type, payload, headers, created_at, 0 AS gen FROM {body_g0}
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 1 AS gen FROM {body_g1}
UNION ALL SELECT id, msg_key, payload_type, payload, headers, created_at, 2 AS gen FROM {body_g2}
-- seqbox:split
CREATE VIEW IF NOT EXISTS {outgoing} AS
SELECT partition_id, seq, body_id, sequenced_at, purged, 0 AS gen FROM {outgoing_g0}
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 1 AS gen FROM {outgoing_g1}
UNION ALL SELECT partition_id, seq, body_id, sequenced_at, purged, 2 AS gen FROM {outgoing_g2}
-- seqbox:split
-- The generation of a message's body, which its outgoing row takes when it
-- is moved: a generation's bodies and outgoing rows are emptied together.
-- Existing rows' bodies are in generation 0. A constant default: SQLite
-- adds the column without rewriting a row.
ALTER TABLE {incoming} ADD COLUMN body_gen INTEGER NOT NULL DEFAULT 0
-- seqbox:split
-- One row per generation: state is current (new messages go there),
-- closed (waiting for every message in it to be acked) or empty
-- (truncated). prune_held_until, on the current row, is the rotator's
-- word that it keeps up: until then the row-by-row prune of body and
-- outgoing pauses (docs/ARCHITECTURE.md, "Vacuum"). Times are TEXT
-- 'YYYY-MM-DD HH:MM:SS.SSS' in UTC, as every time of this schema.
CREATE TABLE IF NOT EXISTS {generations} (
    gen INTEGER NOT NULL PRIMARY KEY,
    state TEXT NOT NULL,
    opened_at TIMESTAMP NULL,
    closed_at TIMESTAMP NULL,
    truncated_at TIMESTAMP NULL,
    prune_held_until TIMESTAMP NULL
)
-- seqbox:split
INSERT OR IGNORE INTO {generations} (gen, state, opened_at) VALUES
    (0, 'current', strftime('%Y-%m-%d %H:%M:%f', 'now')), (1, 'empty', NULL), (2, 'empty', NULL)
