-- Receipts: every consequential outcome leaves one, written in the
-- transaction of the outcome (content and content_hash); a sequencer chains
-- them per workspace later (seq, prev_hash, hash), off the call path.
-- Evidence: human judgments on calls, weighted, per action class; trust
-- violations force review of a class until the principal clears them.

CREATE TABLE receipts (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('execution', 'refusal', 'correction', 'expiry', 'setting_change', 'role_change', 'violation', 'redaction')),
    proposal_id  uuid,
    action_class text,
    -- The content as written; NULL once redacted (content_hash stays).
    content      jsonb CHECK (content IS NULL OR jsonb_typeof(content) = 'object'),
    content_hash bytea NOT NULL CHECK (length(content_hash) = 32),
    -- What stays through a redaction and is hashed into the chain.
    metadata     jsonb NOT NULL CHECK (jsonb_typeof(metadata) = 'object'),
    seq          bigint CHECK (seq > 0),
    prev_hash    bytea CHECK (prev_hash IS NULL OR length(prev_hash) = 32),
    hash         bytea CHECK (hash IS NULL OR length(hash) = 32),
    redacted_for text CHECK (redacted_for IS NULL OR length(redacted_for) BETWEEN 1 AND 500),
    redacted_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    chained_at   timestamptz,
    CHECK ((seq IS NULL) = (hash IS NULL) AND (seq IS NULL) = (prev_hash IS NULL)),
    CHECK ((content IS NULL) = (redacted_at IS NOT NULL)),
    UNIQUE (workspace_id, seq)
);

CREATE INDEX receipts_unchained_idx ON receipts (workspace_id, created_at, id) WHERE seq IS NULL;
CREATE INDEX receipts_proposal_idx ON receipts (proposal_id) WHERE proposal_id IS NOT NULL;

CREATE TABLE evidence (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id      uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    action_class      text NOT NULL CHECK (length(action_class) BETWEEN 1 AND 200),
    label             text NOT NULL CHECK (label IN ('sent', 'approved', 'minor_edit', 'edited', 'heavy_rewrite', 'held', 'rejected', 'dropped', 'violation')),
    provenance        text NOT NULL CHECK (provenance IN ('receipt', 'principal', 'connector', 'model_inferred')),
    decision_weight   double precision NOT NULL CHECK (decision_weight BETWEEN -1 AND 1),
    provenance_weight double precision NOT NULL CHECK (provenance_weight BETWEEN 0 AND 1),
    weight            double precision NOT NULL CHECK (weight BETWEEN -1 AND 1),
    receipt_id        uuid REFERENCES receipts (id) ON DELETE SET NULL,
    proposal_id       uuid,
    recorded_by       uuid REFERENCES users (id) ON DELETE SET NULL,
    note              text CHECK (note IS NULL OR length(note) <= 500),
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX evidence_class_idx ON evidence (workspace_id, action_class, created_at);

CREATE TABLE trust_violations (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    action_class text NOT NULL,
    receipt_id   uuid REFERENCES receipts (id) ON DELETE SET NULL,
    category     text NOT NULL CHECK (category IN ('safety_incident', 'leak', 'wrong_recipient', 'other')),
    reason       text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    flagged_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    cleared_at   timestamptz,
    cleared_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    clear_note   text CHECK (clear_note IS NULL OR length(clear_note) BETWEEN 1 AND 500)
);

CREATE INDEX trust_violations_open_idx ON trust_violations (workspace_id, action_class) WHERE cleared_at IS NULL;

-- An admin's graduation threshold for a class in a workspace.
CREATE TABLE trust_thresholds (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    action_class text NOT NULL,
    ci_low       double precision NOT NULL CHECK (ci_low > 0 AND ci_low < 1),
    min_samples  integer NOT NULL CHECK (min_samples BETWEEN 1 AND 100000),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, action_class)
);

-- The decision's inputs, so a past call can be decided again under another
-- setting (the shadow preview) without running anything.
ALTER TABLE proposals ADD COLUMN decision_input jsonb;
