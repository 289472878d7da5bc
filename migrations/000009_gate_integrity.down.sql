DELETE FROM idempotency_keys WHERE principal <> '';
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_pkey,
    DROP COLUMN proposal_id,
    DROP COLUMN principal,
    ADD PRIMARY KEY (workspace_id, tool, key);

DROP TABLE approver_roles;

ALTER TABLE approval_votes DROP COLUMN constraints;

DROP INDEX approvals_status_idx;

UPDATE approvals SET approver_role = 'approver' WHERE approver_role NOT IN ('approver', 'admin');
ALTER TABLE approvals
    DROP CONSTRAINT approvals_approver_role_check,
    ADD CONSTRAINT approvals_approver_role_check CHECK (approver_role IN ('approver', 'admin'));

ALTER TABLE proposals DROP COLUMN effect_decision;
