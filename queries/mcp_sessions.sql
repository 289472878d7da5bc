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

-- name: TouchMCPSession :execrows
-- The session was used (the caller writes it at most once a minute). 0
-- rows: it was closed (or swept) meanwhile, on some instance, and the
-- caller lets its copy go even if it missed the notification.
UPDATE mcp_sessions SET seen_at = now()
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND closed_at IS NULL;

-- name: CloseMCPSession :execrows
-- The client ended the session (DELETE /mcp): no instance takes it up
-- again. Only the token that opened it can.
UPDATE mcp_sessions SET closed_at = now()
WHERE workspace_id = sqlc.arg(workspace_id) AND id = sqlc.arg(id) AND token_id = sqlc.arg(token_id) AND closed_at IS NULL;

-- name: DeleteIdleMCPSessions :execrows
-- The sweeper forgets sessions idle since before idle_since (not the
-- bindings of 2026-07-28 clients, which have no session to end).
DELETE FROM mcp_sessions WHERE seen_at < sqlc.arg(idle_since) AND id NOT LIKE 'stateless-%';

-- name: StatelessMCPBinding :one
-- The conversation that a 2026-07-28 client's calls are proposed in when
-- it names no scope: one per token and client name, planned by the first
-- request that needs it (conversation_id, created by the first tool call)
-- and found by every later one. The insert writes nothing when the row
-- exists; the select finds it then (one statement, one snapshot: exactly
-- one of the two answers).
WITH ins AS (
    INSERT INTO mcp_sessions (workspace_id, id, token_id, owner_id, conversation_id, planned, client_name, initialize, protocol_version)
    VALUES (sqlc.arg(workspace_id), sqlc.arg(id), sqlc.arg(token_id), sqlc.arg(owner_id), sqlc.arg(conversation_id), true,
            sqlc.arg(client_name), '{}'::jsonb, sqlc.arg(protocol_version))
    ON CONFLICT (workspace_id, id) DO NOTHING
    RETURNING conversation_id
)
SELECT conversation_id::uuid AS conversation_id FROM ins
UNION ALL
SELECT s.conversation_id::uuid FROM mcp_sessions s WHERE s.workspace_id = sqlc.arg(workspace_id) AND s.id = sqlc.arg(id)
LIMIT 1;

-- name: UseMCPRequestState :execrows
-- A requestState is used: 1 the first time, 0 when it was used before.
INSERT INTO mcp_request_states (workspace_id, nonce, expires_at) VALUES (sqlc.arg(workspace_id), sqlc.arg(nonce), sqlc.arg(expires_at))
ON CONFLICT (workspace_id, nonce) DO NOTHING;

-- name: DeleteExpiredMCPRequestStates :execrows
-- The sweeper forgets the nonces of states that expired.
DELETE FROM mcp_request_states WHERE expires_at < now();
