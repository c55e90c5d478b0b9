-- Timestamps are TEXT 'YYYY-MM-DD HH:MM:SS.SSS' in UTC from strftime, so that
-- lease and retry comparisons are plain string comparisons.
CREATE TABLE IF NOT EXISTS {{.Partitions}} (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    partition_no INTEGER NOT NULL,
    sequence INTEGER NOT NULL DEFAULT 0,
    UNIQUE (queue, partition_no)
)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Body}} (
    id BLOB NOT NULL PRIMARY KEY,
    payload_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    headers TEXT NULL,
    created_at TIMESTAMP NOT NULL
)
-- seqbox:split
-- A plain rowid key: SQLite has one writer, so rowid order is commit order.
CREATE TABLE IF NOT EXISTS {{.Incoming}} (
    id INTEGER PRIMARY KEY,
    partition_id INTEGER NOT NULL,
    body_id BLOB NOT NULL
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.Incoming}}_partition_id ON {{.Incoming}} (partition_id, id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Outgoing}} (
    partition_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body_id BLOB NOT NULL,
    sequenced_at TIMESTAMP NOT NULL,
    PRIMARY KEY (partition_id, seq)
) WITHOUT ROWID
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.Outgoing}}_body_id ON {{.Outgoing}} (body_id)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.Processor}} (
    partition_id INTEGER NOT NULL PRIMARY KEY,
    processed_seq INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NULL,
    next_attempt_at TIMESTAMP NULL,
    locked_by TEXT NULL,
    locked_until TIMESTAMP NULL
)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.VacuumCounter}} (
    partition_id INTEGER NOT NULL PRIMARY KEY,
    counter INTEGER NOT NULL DEFAULT 0
)
-- seqbox:split
CREATE TABLE IF NOT EXISTS {{.DeadLetters}} (
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
)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.DeadLetters}}_status_deadline ON {{.DeadLetters}} (status, deadline)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {{.DeadLetters}}_status_failed_at ON {{.DeadLetters}} (status, failed_at)
