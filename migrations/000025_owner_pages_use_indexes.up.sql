-- The home page and the header's counts read a user's waiting cards and
-- latest agent calls through indexes, however many calls the user has.
--
-- Why: both filtered proposals by owner (an index on owner_id alone) and
-- then by status or kind, row by row. An owner with half a million
-- automatic calls (a day of an agent at a few calls a second) waited
-- 2.4 s for the header's count of waiting cards (PostgreSQL chose a
-- sequential scan: nearly every row was the owner's) and 0.7 s for the
-- latest agent calls, on every page.
--
-- - Waiting cards: a partial index of the pending proposals only. An
--   automatic call is written applied (or refused), so it never enters
--   it: the index costs the call nothing.
-- - Latest agent calls: the owner's proposals by time, which replaces the
--   index on owner_id alone (same cost per call). ListAgentOutcomes names
--   the owner (the proposer is the owner: migration 24).
DROP INDEX proposals_owner_idx;
CREATE INDEX proposals_waiting_idx ON proposals (workspace_id, owner_id, created_at) WHERE status = 'pending';
CREATE INDEX proposals_owner_time_idx ON proposals (workspace_id, owner_id, created_at);
