-- The full-text index on every call's rationale goes: no query reads it.
--
-- Why: the intent view's search (queries/intent.sql) matches the latest
-- calls of each source, a bounded set it reads through
-- proposals_owner_time_idx, and computes their text vectors itself; no
-- statement searches all calls' rationales. Yet every call added its
-- rationale's words to the index: a GIN pending-list insert (one WAL
-- record per call, measured with pg_walinspect) and their merge into the
-- index at each vacuum.
DROP INDEX proposals_rationale_fts_idx;
