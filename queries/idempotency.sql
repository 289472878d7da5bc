-- Idempotency keys belong to the caller: (workspace, principal, tool, key).
-- A principal is "token:<id>" for an API token, "user:<id>" for a session.

-- name: ClaimIdempotencyKey :one
-- Takes a fresh key, or one whose window has passed. No row back: the key
-- is held by another request of the same caller (in flight or done).
INSERT INTO idempotency_keys (workspace_id, principal, tool, key, request_hash, expires_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (workspace_id, principal, tool, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, state = 'in_flight', response_status = NULL,
        response_content_type = NULL, response_body = NULL, proposal_id = NULL, created_at = now(),
        expires_at = EXCLUDED.expires_at
    WHERE idempotency_keys.expires_at <= now()
RETURNING created_at;

-- name: TakeOverIdempotencyKey :one
-- A key whose request died in flight before it recorded a proposal (its
-- lease has passed): the retry takes it over and runs the call.
UPDATE idempotency_keys SET created_at = now()
WHERE workspace_id = $1 AND principal = $2 AND tool = $3 AND key = $4
  AND state = 'in_flight' AND proposal_id IS NULL AND created_at <= sqlc.arg(lease_start)
RETURNING created_at;

-- name: GetIdempotencyKey :one
SELECT * FROM idempotency_keys WHERE workspace_id = $1 AND principal = $2 AND tool = $3 AND key = $4;

-- name: LinkIdempotencyKey :execrows
-- In the proposal's transaction: the key now answers with that proposal's
-- real state if its request dies before storing a response. No row: a
-- retry took the key over (this request outlived its lease), so this
-- request must not record its call.
UPDATE idempotency_keys SET proposal_id = sqlc.arg(proposal_id)
WHERE workspace_id = $1 AND principal = $2 AND tool = $3 AND key = $4 AND state = 'in_flight'
  AND created_at = sqlc.arg(claimed_at);

-- name: StoreIdempotentResponse :exec
UPDATE idempotency_keys SET state = 'done', response_status = $5, response_content_type = $6, response_body = $7
WHERE workspace_id = $1 AND principal = $2 AND tool = $3 AND key = $4 AND state = 'in_flight'
  AND created_at = sqlc.arg(claimed_at);

-- name: ReleaseIdempotencyKey :exec
-- A refused request frees its key, unless it already recorded a proposal.
DELETE FROM idempotency_keys
WHERE workspace_id = $1 AND principal = $2 AND tool = $3 AND key = $4 AND state = 'in_flight' AND proposal_id IS NULL
  AND created_at = sqlc.arg(claimed_at);

-- name: DeleteExpiredIdempotencyKeys :execrows
DELETE FROM idempotency_keys WHERE expires_at <= now();
