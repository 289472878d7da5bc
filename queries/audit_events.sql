-- name: InsertAuditEvent :one
INSERT INTO audit_events (workspace_id, actor_kind, actor_user_id, actor_token_id, action, subject_type, subject_id, data, retention_until)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
RETURNING *;

-- name: ListAuditEventsForSubject :many
SELECT * FROM audit_events
WHERE workspace_id = $1 AND subject_type = $2 AND subject_id = $3
ORDER BY id;

-- name: PurgeExpiredAuditEvents :execrows
-- Deletes the rows whose retention has passed.
DELETE FROM audit_events WHERE retention_until < $1;
