DROP INDEX approvals_recent_idx;
DROP INDEX approvals_history_idx;
DROP INDEX approvals_queue_idx;
CREATE INDEX approvals_queue_idx ON approvals (workspace_id, status, expires_at);
