-- A message's Key is stored with it and handed to handlers (Delivery.Key),
-- so a relay can use it as a broker's partition or routing key; a dead
-- letter keeps it and its replay carries it. Bytes, as Go strings are.
ALTER TABLE {body} ADD COLUMN msg_key BLOB NULL
-- seqbox:split
ALTER TABLE {dead_letters} ADD COLUMN msg_key BLOB NULL
