-- name: InsertOutbox :one
INSERT INTO outbox (workspace_id, kind, recipient, subject, body, response_status)
VALUES (sqlc.arg(workspace_id), sqlc.arg(kind), sqlc.arg(recipient), sqlc.narg(subject), sqlc.arg(body), sqlc.narg(response_status))
RETURNING *;

-- name: ListOutbox :many
-- The workspace's outbox, newest first.
SELECT * FROM outbox WHERE workspace_id = $1 ORDER BY id DESC LIMIT $2;

-- name: InsertPaymentRequest :one
-- The amount travels as float8 (at most 1e9 with two decimals, exact in a
-- float8's 15 significant digits) and is stored as numeric(18,2).
INSERT INTO payment_requests (workspace_id, amount, currency, payee, status, performed_at)
VALUES (sqlc.arg(workspace_id), sqlc.arg(amount)::float8, sqlc.arg(currency), sqlc.arg(payee), 'performed', now())
RETURNING id, workspace_id, amount::float8 AS amount, currency, payee, status, performed_at, created_at;
