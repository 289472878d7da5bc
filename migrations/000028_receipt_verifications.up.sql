-- Receipt chain verifications run in the background, one row per run
-- (issue 32): a request starts a run and answers at once; a worker on any
-- instance claims it (FOR UPDATE SKIP LOCKED), reads the chain a page at
-- a time, writes its progress after each page and its result at the end.
--
-- Why: verifying 1.2M receipts inside one request took 107 s. The row
-- holds the verified prefix (checked, head_seq, head_hash and the content
-- errors counted so far), so a run whose instance died (its heartbeat
-- stale) is resumed by another from where it stopped. The verified head
-- is the head of the latest run that ended ok: one fact, read from here,
-- not copied into a second table.
CREATE TABLE receipt_verifications (
    id                      uuid PRIMARY KEY, -- v7, from the application
    workspace_id            uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    requested_by            uuid REFERENCES users (id) ON DELETE SET NULL,
    status                  text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'done', 'failed')),
    -- The chain head when the run first started: it verifies seq 1 to it.
    target_seq              bigint CHECK (target_seq >= 0),
    -- The verified prefix so far; the result's, once done.
    checked                 bigint NOT NULL DEFAULT 0 CHECK (checked >= 0),
    head_seq                bigint NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
    head_hash               sha256_digest NOT NULL,
    content_errors          bigint NOT NULL DEFAULT 0 CHECK (content_errors >= 0),
    first_content_error_seq bigint NOT NULL DEFAULT 0 CHECK (first_content_error_seq >= 0),
    -- The result (done): ok, or where and why not; the receipts that
    -- waited for the sequencer when it ended.
    ok                      boolean,
    first_bad_seq           bigint CHECK (first_bad_seq > 0),
    reason                  text,
    pending                 bigint CHECK (pending >= 0),
    oldest_pending_at       timestamptz,
    -- Why a run failed (failed): safe to show; the log has the cause.
    error                   text,
    -- Claims so far: a worker writes only while its claim is the latest.
    attempt                 integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    created_at              timestamptz NOT NULL DEFAULT now(),
    started_at              timestamptz,
    heartbeat_at            timestamptz,
    finished_at             timestamptz,
    CHECK ((status IN ('done', 'failed')) = (finished_at IS NOT NULL)),
    CHECK ((status = 'running') = (heartbeat_at IS NOT NULL)),
    CHECK (status = 'queued' OR (started_at IS NOT NULL AND target_seq IS NOT NULL)),
    CHECK ((status = 'done') = (ok IS NOT NULL AND pending IS NOT NULL)),
    CHECK ((ok IS FALSE) = (first_bad_seq IS NOT NULL AND reason IS NOT NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL))
);

-- At most one run waits or runs per workspace: starting another joins it.
CREATE UNIQUE INDEX receipt_verifications_active_idx ON receipt_verifications (workspace_id) WHERE status IN ('queued', 'running');
-- The workers' queue, and the verified head (the latest run that ended ok).
CREATE INDEX receipt_verifications_queue_idx ON receipt_verifications (created_at) WHERE status IN ('queued', 'running');
CREATE INDEX receipt_verifications_verified_idx ON receipt_verifications (workspace_id, finished_at DESC) WHERE ok;
