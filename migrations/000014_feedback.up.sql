-- Agent feedback: an agent (or a user) says what it tried, what it
-- expected and what happened; approvers and admins triage it.
CREATE TABLE feedback (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id          uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    submitted_by_user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    submitted_by_token_id uuid REFERENCES api_tokens (id) ON DELETE SET NULL,
    submitted_by_kind     text NOT NULL CHECK (submitted_by_kind IN ('user', 'agent')),
    token_name            text NOT NULL DEFAULT '',
    attempted_action      text NOT NULL CHECK (char_length(attempted_action) BETWEEN 1 AND 2000),
    expected_outcome      text NOT NULL CHECK (char_length(expected_outcome) BETWEEN 1 AND 2000),
    actual_outcome        text NOT NULL CHECK (char_length(actual_outcome) BETWEEN 1 AND 2000),
    tool_called           text NOT NULL DEFAULT '' CHECK (char_length(tool_called) <= 200),
    tool_known            boolean NOT NULL DEFAULT true,
    error_seen            text NOT NULL DEFAULT '' CHECK (char_length(error_seen) <= 4000),
    severity              text NOT NULL CHECK (severity IN ('low', 'med', 'high')),
    rationale             text NOT NULL CHECK (char_length(rationale) BETWEEN 10 AND 500),
    proposal_id           uuid REFERENCES proposals (id) ON DELETE SET NULL,
    status                text NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'triaged', 'planned', 'done', 'wontfix')),
    admin_note            text NOT NULL DEFAULT '' CHECK (char_length(admin_note) <= 2000),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX feedback_workspace_created_idx ON feedback (workspace_id, created_at DESC);

-- Rationale enforcement mode: strict (the default) refuses a missing or
-- short rationale; warn accepts it with a warning until warn_until, and is
-- strict again by itself after it.
ALTER TABLE workspaces
    ADD COLUMN rationale_mode text NOT NULL DEFAULT 'strict' CHECK (rationale_mode IN ('strict', 'warn')),
    ADD COLUMN rationale_warn_until timestamptz,
    ADD CONSTRAINT workspaces_rationale_warn_until_check CHECK (rationale_mode = 'strict' OR rationale_warn_until IS NOT NULL);

-- In warn mode a call may be recorded with a short or missing rationale;
-- the service enforces the strict floor otherwise.
ALTER TABLE proposals DROP CONSTRAINT proposals_rationale_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_rationale_check CHECK (char_length(rationale) <= 500);

-- The intent view searches rationales with full-text search.
CREATE INDEX proposals_rationale_fts_idx ON proposals USING gin (to_tsvector('simple', rationale));
CREATE INDEX audit_events_rationale_fts_idx ON audit_events USING gin (to_tsvector('simple', coalesce(data->>'rationale', '')))
    WHERE action = 'proposal.refused';
