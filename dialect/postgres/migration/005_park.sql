-- A queue with the Park failure policy stops a partition at a head that
-- exhausted its attempts: parked_at marks it, and no process leases it
-- until an operator resumes or skips it (docs/ARCHITECTURE.md, "Failure
-- policy: dead-letter or park").
ALTER TABLE {processor} ADD COLUMN IF NOT EXISTS parked_at TIMESTAMPTZ NULL
