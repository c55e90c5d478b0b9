-- Purge (docs/ARCHITECTURE.md, "Purge"): a purged message that already has
-- a seq stays as a tombstone, so the partition's seqs stay gap-free; the
-- processor passes over it without calling the handler.
ALTER TABLE {outgoing} ADD COLUMN purged INTEGER NOT NULL DEFAULT 0
-- seqbox:split
-- The batch limit of the live lease: the seqs a purge must leave to the
-- delivery in progress are (processed_seq, processed_seq + lease_limit].
ALTER TABLE {processor} ADD COLUMN lease_limit INTEGER NULL
-- seqbox:split
-- Purges that made tombstones in the partition (read back by PostgreSQL's
-- one-statement leases; kept on every database so the purge is one SQL).
ALTER TABLE {processor} ADD COLUMN purges INTEGER NOT NULL DEFAULT 0
