-- Tool contracts: each proposal records its contract facts and the layered
-- decision; idempotency keys and rate counters live here so they hold across
-- server instances; audit rows carry their retention.

ALTER TABLE workspaces
    ADD COLUMN internal_domains  text[] NOT NULL DEFAULT '{}',
    ADD COLUMN webhook_allowlist text[] NOT NULL DEFAULT '{}';

ALTER TABLE proposals
    ADD COLUMN authority    text CHECK (authority IN ('read', 'write-idempotent', 'write-non-idempotent', 'irreversible')),
    ADD COLUMN risk         text CHECK (risk IN ('low', 'medium', 'high')),
    ADD COLUMN action_class text,
    ADD COLUMN state        text CHECK (state IN ('allowed', 'allowed_with_constraints', 'review_required', 'deferred', 'human_only', 'blocked')),
    ADD COLUMN decision     jsonb,
    ADD COLUMN constraints  jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(constraints) = 'array'),
    ADD COLUMN dry_run      boolean NOT NULL DEFAULT false,
    DROP CONSTRAINT proposals_status_check,
    ADD CONSTRAINT proposals_status_check CHECK (status IN ('pending', 'pending_approval', 'applying', 'applied', 'rejected', 'failed'));

-- The IETF Idempotency-Key draft: a key is scoped to workspace and tool; the
-- first request holds it in_flight, then stores its response for replays.
CREATE TABLE idempotency_keys (
    workspace_id          uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    tool                  text NOT NULL,
    key                   text NOT NULL CHECK (key ~ '^[A-Za-z0-9_-]{16,64}$'),
    request_hash          bytea NOT NULL CHECK (length(request_hash) = 32),
    state                 text NOT NULL DEFAULT 'in_flight' CHECK (state IN ('in_flight', 'done')),
    response_status       integer,
    response_content_type text,
    response_body         bytea,
    created_at            timestamptz NOT NULL DEFAULT now(),
    expires_at            timestamptz NOT NULL,
    PRIMARY KEY (workspace_id, tool, key),
    CHECK ((state = 'done') = (response_status IS NOT NULL AND response_body IS NOT NULL))
);

CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);

-- Fixed-window rate counters, one row per bucket and window.
CREATE TABLE rate_counters (
    bucket       text NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL CHECK (count >= 0),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (bucket, window_start)
);

CREATE INDEX rate_counters_expiry_idx ON rate_counters (expires_at);

ALTER TABLE audit_events ADD COLUMN retention_until timestamptz NOT NULL DEFAULT now() + interval '365 days';
CREATE INDEX audit_events_retention_idx ON audit_events (retention_until);
