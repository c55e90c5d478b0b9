-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler. A constant
-- default: no table rewrite.
ALTER TABLE {outgoing} ADD COLUMN IF NOT EXISTS purged SMALLINT NOT NULL DEFAULT 0
-- seqbox:split
-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
ALTER TABLE {processor} ADD COLUMN IF NOT EXISTS lease_limit INTEGER NULL
-- seqbox:split
-- Purges that made tombstones in the partition: a lease statement whose
-- snapshot predates one re-reads its batch (docs/ARCHITECTURE.md, "Purge").
ALTER TABLE {processor} ADD COLUMN IF NOT EXISTS purges BIGINT NOT NULL DEFAULT 0
