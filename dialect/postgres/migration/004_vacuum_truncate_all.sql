-- Autovacuum truncating a table takes an ACCESS EXCLUSIVE lock. 002 turned
-- truncation off on the large hot tables; the small ones are updated on
-- every move, lease and ack and truncate just as often: a soak with
-- autovacuum on stalled the whole pipeline while autovacuum truncated
-- partitions (wait event VacuumTruncate; docs/ARCHITECTURE.md, "Cost that
-- stays flat").
ALTER TABLE {partitions} SET (vacuum_truncate = off)
-- seqbox:split
ALTER TABLE {processor} SET (vacuum_truncate = off)
-- seqbox:split
ALTER TABLE {vacuum_counter} SET (vacuum_truncate = off)
