-- name: GetCursorKey :one
-- The deployment's key for signing page cursors (migration 27).
SELECT key FROM cursor_keys WHERE id = 1;
