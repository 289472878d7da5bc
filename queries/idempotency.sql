-- name: ClaimIdempotencyKey :one
-- Takes a fresh key, or one whose window has passed. No row back: the key
-- is held by another request (in flight or done).
INSERT INTO idempotency_keys (workspace_id, tool, key, request_hash, expires_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (workspace_id, tool, key) DO UPDATE
    SET request_hash = EXCLUDED.request_hash, state = 'in_flight', response_status = NULL,
        response_content_type = NULL, response_body = NULL, created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE idempotency_keys.expires_at <= now()
RETURNING workspace_id;

-- name: GetIdempotencyKey :one
SELECT * FROM idempotency_keys WHERE workspace_id = $1 AND tool = $2 AND key = $3;

-- name: StoreIdempotentResponse :exec
UPDATE idempotency_keys SET state = 'done', response_status = $4, response_content_type = $5, response_body = $6
WHERE workspace_id = $1 AND tool = $2 AND key = $3 AND state = 'in_flight';

-- name: ReleaseIdempotencyKey :exec
DELETE FROM idempotency_keys WHERE workspace_id = $1 AND tool = $2 AND key = $3 AND state = 'in_flight';

-- name: DeleteExpiredIdempotencyKeys :execrows
DELETE FROM idempotency_keys WHERE expires_at <= now();
