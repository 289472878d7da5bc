-- name: GetChatSettings :one
SELECT * FROM chat_settings WHERE conversation_id = $1;

-- name: UpsertChatSettings :one
INSERT INTO chat_settings (conversation_id, model, token_budget) VALUES ($1, $2, $3)
ON CONFLICT (conversation_id) DO UPDATE SET model = EXCLUDED.model, token_budget = EXCLUDED.token_budget, updated_at = now()
RETURNING *;

-- name: ConversationTokens :one
-- Prompt and completion tokens of every turn in the conversation.
SELECT coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens, coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens
FROM chat_turns WHERE workspace_id = $1 AND conversation_id = $2;

-- name: InsertTurn :one
INSERT INTO chat_turns (workspace_id, conversation_id, owner_id, agent_token_id, model, messages, lease_owner, lease_until)
VALUES ($1, $2, $3, $4, $5, $6, $7, now() + sqlc.arg(lease)::interval)
RETURNING *;

-- name: GetTurn :one
SELECT * FROM chat_turns WHERE id = $1 AND workspace_id = $2;

-- name: GetOwnedTurn :one
-- Owner-scoped: another user's turn is not found.
SELECT * FROM chat_turns WHERE id = $1 AND conversation_id = $2 AND workspace_id = $3 AND owner_id = $4;

-- name: LatestTurn :one
SELECT * FROM chat_turns WHERE workspace_id = $1 AND conversation_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1;

-- name: ClaimTurn :one
-- Takes one turn that needs running for this instance: a running turn
-- whose lease expired (its instance stopped), or a waiting turn whose
-- every call is resolved. SKIP LOCKED and the lease make one instance the
-- only one to resume it.
UPDATE chat_turns t SET state = 'running', lease_owner = sqlc.arg(owner), lease_until = now() + sqlc.arg(lease)::interval, updated_at = now()
WHERE t.id = (
    SELECT c.id FROM chat_turns c
    WHERE c.state IN ('running', 'waiting') AND (c.lease_until IS NULL OR c.lease_until < now())
      AND (c.state = 'running' OR NOT EXISTS (
          SELECT 1 FROM chat_tool_calls k JOIN proposals p ON p.id = k.proposal_id AND p.workspace_id = k.workspace_id
          WHERE k.workspace_id = c.workspace_id AND k.turn_id = c.id AND k.outcome IS NULL AND p.status IN ('pending', 'pending_approval', 'applying')))
    ORDER BY c.updated_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING t.*;

-- name: RenewLease :execrows
-- Keeps the turn this instance's; no row: it was stopped or taken over.
UPDATE chat_turns SET lease_until = now() + sqlc.arg(lease)::interval
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND lease_owner = sqlc.arg(owner) AND state = 'running';

-- name: SetStreaming :execrows
UPDATE chat_turns SET streaming = $2, lease_until = now() + sqlc.arg(lease)::interval, updated_at = now()
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND lease_owner = sqlc.arg(owner) AND state = 'running';

-- name: SaveTurn :execrows
-- Records a step: the messages so far, the tokens counted, the state.
UPDATE chat_turns SET messages = $2, streaming = '', prompt_tokens = $3, completion_tokens = $4, model_requests = $5,
    state = sqlc.arg(state), error = sqlc.narg(error), updated_at = now(),
    lease_owner = CASE WHEN sqlc.arg(state)::text = 'running' THEN lease_owner END,
    lease_until = CASE WHEN sqlc.arg(state)::text = 'running' THEN lease_until END,
    finished_at = CASE WHEN sqlc.arg(state)::text IN ('done', 'failed', 'stopped') THEN now() END
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND lease_owner = sqlc.arg(owner) AND state = 'running';

-- name: StopTurn :one
UPDATE chat_turns SET state = 'stopped', error = $2, lease_owner = NULL, lease_until = NULL, updated_at = now(), finished_at = now()
WHERE id = $1 AND workspace_id = $3 AND state IN ('running', 'waiting')
RETURNING *;

-- name: ReleaseLeases :exec
-- A stopping instance hands its running turns over at once.
UPDATE chat_turns SET lease_until = now() WHERE lease_owner = $1 AND state = 'running';

-- name: ExpireLease :exec
-- For tests: the turn's instance is gone.
UPDATE chat_turns SET lease_until = now() - interval '1 second' WHERE id = $1 AND workspace_id = $2;

-- name: InsertToolCall :exec
INSERT INTO chat_tool_calls (workspace_id, turn_id, tool_call_id, seq, tool, proposal_id, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (workspace_id, turn_id, tool_call_id) DO NOTHING;

-- name: ListToolCalls :many
-- A turn's calls and their proposals as they are now.
SELECT k.tool_call_id, k.seq, k.tool, k.proposal_id, k.outcome,
       p.status AS proposal_status, p.result AS proposal_result, p.error AS proposal_error, p.rejection_reason AS proposal_rejection_reason
FROM chat_tool_calls k LEFT JOIN proposals p ON p.id = k.proposal_id AND p.workspace_id = k.workspace_id
WHERE k.workspace_id = $1 AND k.turn_id = $2 ORDER BY k.seq;

-- name: CountToolCalls :one
SELECT count(*) FROM chat_tool_calls WHERE workspace_id = $1 AND turn_id = $2;

-- name: InsertChatMessage :one
INSERT INTO messages (workspace_id, conversation_id, role, content, author_user_id) VALUES ($1, $2, $3, $4, $5) RETURNING *;

-- name: FindModelAgentToken :one
-- The owner's live agent token for a model, if any.
SELECT id FROM api_tokens
WHERE workspace_id = $1 AND user_id = $2 AND kind = 'agent' AND name = $3 AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at DESC LIMIT 1;

-- name: CreateModelAgentToken :one
-- An agent token no one can present: its hash is of random bytes never
-- shown. It names the model in audit rows and receipts.
INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash) VALUES ($1, $2, 'agent', $3, $4)
RETURNING id;

-- name: AgentPrincipal :one
-- The principal a turn's calls act as: the agent token, its owner and
-- their role, if the token is still live.
SELECT t.id, t.workspace_id, t.user_id, t.name, u.email, m.role,
       ARRAY(SELECT r.role FROM approver_roles r WHERE r.workspace_id = m.workspace_id AND r.user_id = u.id ORDER BY r.role)::text[] AS approver_roles
FROM api_tokens t
JOIN users u ON u.id = t.user_id
JOIN workspace_members m ON m.workspace_id = t.workspace_id AND m.user_id = t.user_id
WHERE t.id = $1 AND t.kind = 'agent' AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now());

-- name: OwnedConversation :one
SELECT id, permission_mode FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: PostponeTurn :exec
-- The turn cannot go on now: any instance resumes it after the interval.
UPDATE chat_turns SET lease_until = now() + sqlc.arg(lease)::interval
WHERE id = $1 AND workspace_id = sqlc.arg(workspace_id) AND lease_owner = sqlc.arg(owner) AND state = 'running';
