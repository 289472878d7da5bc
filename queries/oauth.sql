-- MCP authorization (OAuth 2.1): registered clients, authorization codes,
-- refresh tokens, and the agent tokens (api_tokens rows) that grants are.

-- name: CreateOAuthClient :one
INSERT INTO oauth_clients (client_name, redirect_uris) VALUES ($1, $2)
RETURNING id, client_name, redirect_uris, created_at;

-- name: GetOAuthClient :one
SELECT id, client_name, redirect_uris, created_at FROM oauth_clients WHERE id = $1;

-- name: PruneOAuthClients :execrows
-- Registration is open to anyone: a client registered over a day ago that
-- no grant names is dropped (with its codes).
DELETE FROM oauth_clients c
WHERE c.created_at < now() - interval '1 day'
  AND NOT EXISTS (SELECT 1 FROM api_tokens t WHERE t.oauth_client_id = c.id);

-- name: CreateOAuthCode :exec
INSERT INTO oauth_codes (code_hash, client_id, workspace_id, user_id, redirect_uri, code_challenge, resource, read_only,
                         conversation_id, notebook_id, created_at, expires_at)
VALUES (@code_hash, @client_id, @workspace_id, @user_id, @redirect_uri, @code_challenge, @resource, @read_only,
        sqlc.narg(conversation_id), sqlc.narg(notebook_id), @created_at, @expires_at);

-- name: PruneOAuthCodes :execrows
-- Codes a day past their expiry: too old to be replayed usefully.
DELETE FROM oauth_codes WHERE expires_at < now() - interval '1 day';

-- name: GetOAuthCodeForUpdate :one
-- The code and its client's name, locked: one exchange at a time.
SELECT o.code_hash, o.client_id, o.workspace_id, o.user_id, o.redirect_uri, o.code_challenge, o.resource, o.read_only,
       o.conversation_id, o.notebook_id, o.expires_at, o.used_at, o.token_id, c.client_name, u.email
FROM oauth_codes o
JOIN oauth_clients c ON c.id = o.client_id
JOIN users u ON u.id = o.user_id
WHERE o.code_hash = $1
FOR UPDATE OF o;

-- name: UseOAuthCode :exec
UPDATE oauth_codes SET used_at = now(), token_id = $2 WHERE code_hash = $1 AND used_at IS NULL;

-- name: CreateOAuthGrantToken :one
-- A consent's agent token: its secret is the first access token.
INSERT INTO api_tokens (workspace_id, user_id, kind, name, token_hash, expires_at, scope_read_only,
                        oauth_client_id, audience, secret_expires_at, conversation_id, notebook_id)
VALUES (@workspace_id, @user_id, 'agent', @name, @token_hash, @expires_at::timestamptz, @scope_read_only,
        @oauth_client_id::uuid, @audience::text, @secret_expires_at::timestamptz, sqlc.narg(conversation_id), sqlc.narg(notebook_id))
RETURNING id, created_at;

-- name: CreateOAuthRefreshToken :exec
INSERT INTO oauth_refresh_tokens (token_hash, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4);

-- name: GetOAuthRefreshTokenForUpdate :one
-- A refresh token and its grant, both locked: one refresh at a time, and
-- none while the grant is being revoked.
SELECT r.token_hash, r.token_id, r.expires_at, r.rotated_at,
       t.workspace_id, t.user_id, t.oauth_client_id, t.audience, t.revoked_at, t.scope_read_only
FROM oauth_refresh_tokens r
JOIN api_tokens t ON t.id = r.token_id
WHERE r.token_hash = $1
FOR UPDATE OF r, t;

-- name: MarkOAuthRefreshTokenRotated :exec
UPDATE oauth_refresh_tokens SET rotated_at = now() WHERE token_hash = $1;

-- name: RotateOAuthGrantSecret :execrows
-- A refresh: the grant's new access token, and its end moved to the new
-- refresh token's expiry.
UPDATE api_tokens SET token_hash = @token_hash, secret_expires_at = @secret_expires_at::timestamptz, expires_at = @expires_at::timestamptz
WHERE id = @id AND revoked_at IS NULL AND oauth_client_id IS NOT NULL;

-- name: PruneOAuthRefreshTokens :exec
-- A grant's refresh tokens past use: expired, or rotated over a week ago
-- (kept that long so a stolen one presented again revokes the grant).
DELETE FROM oauth_refresh_tokens
WHERE token_id = $1 AND (expires_at <= now() OR rotated_at < now() - interval '7 days');

-- name: ListOAuthGrants :many
-- What /tokens shows of the grants among these tokens: the client, where
-- it sends people back, the access token's expiry and the binding.
SELECT t.id, c.client_name, c.redirect_uris, t.secret_expires_at, t.audience,
       t.conversation_id, cv.title AS conversation_title, t.notebook_id, nb.title AS notebook_title
FROM api_tokens t
JOIN oauth_clients c ON c.id = t.oauth_client_id
LEFT JOIN conversations cv ON cv.id = t.conversation_id
LEFT JOIN notebooks nb ON nb.id = t.notebook_id
WHERE t.id = ANY (@ids::uuid[]);
