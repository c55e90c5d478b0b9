-- The partition a message was enqueued to, kept with its body: whether a
-- message is still pending is read from its partition's backlog (incoming
-- from the bound, outgoing above the cursor) instead of from an index of
-- every outgoing row's body id, which cost the move as much as the rest
-- of its INSERT (docs/ARCHITECTURE.md, "Which messages are pending"). Bodies written
-- before this migration have none and are looked up as before, without
-- the index.
ALTER TABLE {body} ADD COLUMN IF NOT EXISTS partition_id BIGINT NULL
-- seqbox:split
DROP INDEX IF EXISTS {outgoing}_body
-- seqbox:split
DROP INDEX IF EXISTS {outgoing}_body_id
