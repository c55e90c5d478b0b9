-- Text that comes from outside (headers, error text) is stored as utf8mb4
-- whatever the database's default character set: under a latin1 default a
-- strict server refuses characters outside latin1, and a lenient one turns
-- them into '?', altering what is delivered. Re-running is a no-op.
ALTER TABLE {body} MODIFY headers MEDIUMTEXT CHARACTER SET utf8mb4 NULL
-- seqbox:split
ALTER TABLE {processor} MODIFY last_error TEXT CHARACTER SET utf8mb4 NULL
-- seqbox:split
ALTER TABLE {dead_letters} MODIFY headers MEDIUMTEXT CHARACTER SET utf8mb4 NULL,
    MODIFY last_error TEXT CHARACTER SET utf8mb4 NULL
