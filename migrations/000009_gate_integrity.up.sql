-- Gate integrity at the moment of effect: the decision taken when the call
-- runs beside the one taken when it was proposed; approver roles that tools
-- name (finance-approver) held by users; witness votes that keep their
-- approver's constraints; idempotency keys scoped to the calling principal
-- and linked to the proposal they created.

ALTER TABLE proposals ADD COLUMN effect_decision jsonb;

ALTER TABLE approvals
    DROP CONSTRAINT approvals_approver_role_check,
    ADD CONSTRAINT approvals_approver_role_check CHECK (approver_role ~ '^[a-z][a-z0-9-]{1,62}$');

-- Packets whose proposal is pending approval: what the reconciler checks.
CREATE INDEX approvals_status_idx ON approvals (status, resolved_at);

ALTER TABLE approval_votes
    ADD COLUMN constraints jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(constraints) = 'array');

-- A named approver role held by a user in a workspace. "member",
-- "approver" and "admin" are workspace roles (workspace_members.role), not
-- named approver roles.
CREATE TABLE approver_roles (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role         text NOT NULL CHECK (role ~ '^[a-z][a-z0-9-]{1,62}$' AND role NOT IN ('member', 'approver', 'admin')),
    granted_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id, role)
);

CREATE INDEX approver_roles_role_idx ON approver_roles (workspace_id, role);

-- Keys written before this migration belong to no principal (''); they
-- simply expire.
ALTER TABLE idempotency_keys
    ADD COLUMN principal   text NOT NULL DEFAULT '' CHECK (principal = '' OR principal ~ '^(token|user):[0-9a-f-]{36}$'),
    ADD COLUMN proposal_id uuid REFERENCES proposals (id) ON DELETE SET NULL,
    DROP CONSTRAINT idempotency_keys_pkey,
    ADD PRIMARY KEY (workspace_id, principal, tool, key);
