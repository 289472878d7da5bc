-- The approvals queue reads a page at a time (issue 32): the inbox, its
-- JSON form and the filter bar's counts read through indexes that lead
-- with the workspace, each with a bound on the rows it reads.
--
-- Why: the queue read every packet of its status (LIMIT 200 after a sort
-- of all of them), and the filter bar counted every packet in history
-- (approved, rejected and expired packets accumulate forever). At a
-- million calls with 10k pending packets the page took 1.3 s.
--
-- - Pending packets, soonest expiry first: approvals_queue_idx gains the
--   id, the keyset's tiebreaker, so a page starts at its cursor and stops
--   at its limit without a sort.
-- - Approved, rejected or expired packets, newest first:
--   approvals_history_idx, read backwards from the cursor.
-- - Any status, newest first: approvals_recent_idx.
-- A packet is written once and updated once (when it is resolved); the
-- call's own write path (proposals) gains nothing. The history of similar
-- calls on a packet reuses proposals_decided_idx (migration 11), so
-- proposals gain no index either.
DROP INDEX approvals_queue_idx;
CREATE INDEX approvals_queue_idx ON approvals (workspace_id, status, expires_at, id);
CREATE INDEX approvals_history_idx ON approvals (workspace_id, status, created_at, id);
CREATE INDEX approvals_recent_idx ON approvals (workspace_id, created_at, id);
