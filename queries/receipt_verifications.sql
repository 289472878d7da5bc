-- name: InsertReceiptVerification :one
-- Queues a run, unless one waits or runs for the workspace already
-- (receipt_verifications_active_idx): then it inserts nothing, and no
-- row comes back.
INSERT INTO receipt_verifications (id, workspace_id, requested_by, head_hash)
VALUES (@id, @workspace_id, @requested_by, @head_hash)
ON CONFLICT (workspace_id) WHERE status IN ('queued', 'running') DO NOTHING
RETURNING *;

-- name: GetActiveReceiptVerification :one
SELECT * FROM receipt_verifications WHERE workspace_id = $1 AND status IN ('queued', 'running');

-- name: GetReceiptVerification :one
SELECT * FROM receipt_verifications WHERE id = $1 AND workspace_id = $2;

-- name: ClaimReceiptVerification :one
-- The oldest queued run, or a running one whose worker stopped beating
-- (its instance died): one worker wins it (SKIP LOCKED, and the stale
-- heartbeat is checked again on the locked row). Its first claim fixes
-- the head it verifies to.
UPDATE receipt_verifications v
SET status = 'running', attempt = attempt + 1, heartbeat_at = now(), started_at = coalesce(started_at, now()),
    target_seq = coalesce(target_seq, (SELECT coalesce(max(r.seq), 0)::bigint FROM receipt_links r WHERE r.workspace_id = v.workspace_id))
WHERE v.id = (
    SELECT q.id FROM receipt_verifications q
    WHERE q.status = 'queued' OR (q.status = 'running' AND q.heartbeat_at < now() - make_interval(secs => @stale_seconds::float8))
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING v.*;

-- name: SaveReceiptVerificationProgress :execrows
-- After each page, in its own statement: the verified prefix (where a
-- resumed run goes on from) and the heartbeat. No row: the claim is lost.
UPDATE receipt_verifications
SET checked = @checked, head_seq = @head_seq, head_hash = @head_hash, content_errors = @content_errors,
    first_content_error_seq = @first_content_error_seq, heartbeat_at = now()
WHERE id = @id AND workspace_id = @workspace_id AND attempt = @attempt AND status = 'running';

-- name: FinishReceiptVerification :execrows
UPDATE receipt_verifications
SET status = 'done', finished_at = now(), heartbeat_at = NULL,
    checked = @checked, head_seq = @head_seq, head_hash = @head_hash, content_errors = @content_errors,
    first_content_error_seq = @first_content_error_seq,
    ok = @ok, first_bad_seq = @first_bad_seq, reason = @reason, pending = @pending, oldest_pending_at = @oldest_pending_at
WHERE id = @id AND workspace_id = @workspace_id AND attempt = @attempt AND status = 'running';

-- name: FailReceiptVerification :execrows
UPDATE receipt_verifications
SET status = 'failed', finished_at = now(), heartbeat_at = NULL, error = @error
WHERE id = @id AND workspace_id = @workspace_id AND attempt = @attempt AND status = 'running';

-- name: ReleaseReceiptVerification :execrows
-- A worker that stops (the server closes, or the database failed) puts its
-- run back in the queue, its progress kept, for any instance to resume.
UPDATE receipt_verifications
SET status = 'queued', heartbeat_at = NULL
WHERE id = @id AND workspace_id = @workspace_id AND attempt = @attempt AND status = 'running';

-- name: GetVerifiedReceiptHead :one
-- The verified head: the head of the latest run that ended ok.
SELECT id, head_seq, head_hash, finished_at::timestamptz AS verified_at FROM receipt_verifications
WHERE workspace_id = $1 AND ok
ORDER BY finished_at DESC
LIMIT 1;
