DROP INDEX feedback_severity_idx;
DROP INDEX feedback_status_idx;
DROP INDEX feedback_tool_idx;
DROP INDEX feedback_recent_idx;
CREATE INDEX feedback_workspace_created_idx ON feedback (workspace_id, created_at DESC);
