-- A dead letter is found by its message id (DeadLetters.Get, `seqbox dlq
-- show`, the web UI's links by message id): by index, not by a scan.
CREATE INDEX IF NOT EXISTS {dead_letters}_message_id ON {dead_letters} (message_id)
