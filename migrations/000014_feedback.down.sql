DROP INDEX IF EXISTS audit_events_rationale_fts_idx;
DROP INDEX IF EXISTS proposals_rationale_fts_idx;
UPDATE proposals SET rationale = rpad(rationale, 10, '.') WHERE length(rationale) < 10;
ALTER TABLE proposals DROP CONSTRAINT proposals_rationale_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_rationale_check CHECK (length(rationale) BETWEEN 10 AND 500);
ALTER TABLE workspaces DROP CONSTRAINT workspaces_rationale_warn_until_check,
    DROP COLUMN rationale_warn_until,
    DROP COLUMN rationale_mode;
DROP TABLE feedback;
