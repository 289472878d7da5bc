-- The feedback triage list reads a page at a time (issue 32): the page,
-- its JSON and the CSV export read by keyset (created_at, id) newest
-- first, and the counts by tool and per week read a bounded number of
-- rows, each through an index that leads with the workspace.
--
-- Why: the list read up to 1000 items of the last 90 days on every
-- request, sorted by an index without the id, and counted tools and weeks
-- from those rows (wrong past 1000 items); a filter on a tool or a status
-- read every item of the window to find its matches.
--
-- - No filter (or only since): feedback_recent_idx gains the id, the
--   keyset's tiebreaker, so a page starts at its cursor and stops at its
--   limit without a sort. It carries what the counts need (tool_called,
--   tool_known), so they read the index alone.
-- - A tool filter (the by-tool table's links): feedback_tool_idx, with the
--   status and severity a page may also filter on.
-- - A status filter (the triage queue: status new), then a severity
--   filter: feedback_status_idx and feedback_severity_idx.
-- Feedback is written once per report and updated on a status change:
-- the call's write path gains nothing.
DROP INDEX feedback_workspace_created_idx;
CREATE INDEX feedback_recent_idx ON feedback (workspace_id, created_at, id) INCLUDE (tool_called, tool_known);
CREATE INDEX feedback_tool_idx ON feedback (workspace_id, tool_called, created_at, id) INCLUDE (tool_known, status, severity);
CREATE INDEX feedback_status_idx ON feedback (workspace_id, status, created_at, id) INCLUDE (severity, tool_called, tool_known);
CREATE INDEX feedback_severity_idx ON feedback (workspace_id, severity, created_at, id) INCLUDE (tool_called, tool_known);
