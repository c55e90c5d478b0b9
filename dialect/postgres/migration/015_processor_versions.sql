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
ALTER TABLE {processor} ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 0
-- seqbox:split
ALTER TABLE {processor} ALTER COLUMN version DROP DEFAULT
-- seqbox:split
-- One statement: a migration that dies half-way leaves the old key.
ALTER TABLE {processor} DROP CONSTRAINT IF EXISTS {processor}_pkey,
    ADD CONSTRAINT {processor}_pkey PRIMARY KEY (partition_id, version)
