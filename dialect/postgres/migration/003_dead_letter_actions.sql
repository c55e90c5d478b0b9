-- Dead letters an operator acts on (docs/ARCHITECTURE.md, "Dead letters"):
-- note is the operator's note (resolve) or reason (discard); replay_id is
-- the id of the copy a replay enqueued, found again when that copy is acked.
ALTER TABLE {dead_letters} ADD COLUMN IF NOT EXISTS note TEXT NULL,
    ADD COLUMN IF NOT EXISTS replay_id BYTEA NULL
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dead_letters}_replay_id ON {dead_letters} (replay_id)
-- seqbox:split
CREATE INDEX IF NOT EXISTS {dead_letters}_partition ON {dead_letters} (partition_id, id)
