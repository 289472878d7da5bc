-- name: InsertMCPSession :exec
-- A session as its initialize left it (internal/mcp/sessions.go).
INSERT INTO mcp_sessions (workspace_id, id, token_id, owner_id, conversation_id, notebook_id, planned, client_name, initialize, protocol_version)
VALUES (sqlc.arg(workspace_id), sqlc.arg(id), sqlc.arg(token_id), sqlc.arg(owner_id), sqlc.narg(conversation_id), sqlc.narg(notebook_id),
        sqlc.arg(planned), sqlc.arg(client_name), sqlc.arg(initialize), sqlc.arg(protocol_version));

-- name: GetLiveMCPSession :one
-- A session another instance opened, to take up: open, the same token's,
-- and used within the idle timeout (idle_since: now minus the timeout).
-- Any other is not found, whoever asks.
SELECT * FROM mcp_sessions
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND token_id = sqlc.arg(token_id)
  AND closed_at IS NULL AND seen_at > sqlc.arg(idle_since);

-- name: TouchMCPSession :exec
-- The session was used (the caller writes it at most once a minute).
UPDATE mcp_sessions SET seen_at = now()
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND closed_at IS NULL;

-- name: CloseMCPSession :execrows
-- The client ended the session (DELETE /mcp): no instance takes it up
-- again. Only the token that opened it can.
UPDATE mcp_sessions SET closed_at = now()
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND token_id = sqlc.arg(token_id) AND closed_at IS NULL;

-- name: DeleteIdleMCPSessions :execrows
-- The sweeper forgets sessions idle since before idle_since.
DELETE FROM mcp_sessions WHERE seen_at < sqlc.arg(idle_since);
