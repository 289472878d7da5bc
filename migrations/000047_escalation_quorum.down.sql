DROP INDEX IF EXISTS approvals_escalate_idx;
ALTER TABLE approvals
    DROP CONSTRAINT approvals_escalated_check,
    DROP CONSTRAINT approvals_escalation_check,
    DROP COLUMN resolver_roles,
    DROP COLUMN escalated_at,
    DROP COLUMN escalate_to,
    DROP COLUMN escalate_at,
    DROP COLUMN quorum;
ALTER TABLE workspaces
    DROP CONSTRAINT workspaces_escalation_check,
    DROP COLUMN approval_quorums,
    DROP COLUMN escalate_to_role,
    DROP COLUMN escalate_after_minutes;
