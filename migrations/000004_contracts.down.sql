DROP INDEX audit_events_retention_idx;
ALTER TABLE audit_events DROP COLUMN retention_until;
DROP TABLE rate_counters;
DROP TABLE idempotency_keys;
DELETE FROM proposals WHERE status = 'pending_approval';
ALTER TABLE proposals
    DROP CONSTRAINT proposals_status_check,
    ADD CONSTRAINT proposals_status_check CHECK (status IN ('pending', 'applying', 'applied', 'rejected', 'failed')),
    DROP COLUMN dry_run,
    DROP COLUMN constraints,
    DROP COLUMN decision,
    DROP COLUMN state,
    DROP COLUMN action_class,
    DROP COLUMN risk,
    DROP COLUMN authority;
ALTER TABLE workspaces
    DROP COLUMN webhook_allowlist,
    DROP COLUMN internal_domains;
