-- Approval packets: a deferred call waits for a person with the approver
-- role, until it expires. Votes record who approved (two distinct people
-- when a witness is required).

ALTER TABLE proposals
    DROP CONSTRAINT proposals_status_check,
    ADD CONSTRAINT proposals_status_check CHECK (status IN ('pending', 'pending_approval', 'applying', 'applied', 'rejected', 'failed', 'expired')),
    DROP CONSTRAINT proposals_apply_path_check,
    ADD CONSTRAINT proposals_apply_path_check CHECK (apply_path IN ('auto', 'human', 'approval'));

CREATE TABLE approvals (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id     uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    proposal_id      uuid NOT NULL UNIQUE REFERENCES proposals (id) ON DELETE CASCADE,
    summary          text NOT NULL CHECK (length(summary) BETWEEN 1 AND 500),
    approver_role    text NOT NULL CHECK (approver_role IN ('approver', 'admin')),
    requires_witness boolean NOT NULL DEFAULT false,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
    constraints      jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(constraints) = 'array'),
    rejection_reason text,
    resolved_by      uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    resolved_at      timestamptz
);

CREATE INDEX approvals_queue_idx ON approvals (workspace_id, status, expires_at);

CREATE TABLE approval_votes (
    approval_id uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (approval_id, user_id)
);
