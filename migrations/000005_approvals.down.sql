DROP TABLE approval_votes;
DROP TABLE approvals;
UPDATE proposals SET status = 'rejected', rejection_reason = coalesce(rejection_reason, 'expired') WHERE status = 'expired';
UPDATE proposals SET apply_path = 'human' WHERE apply_path = 'approval';
ALTER TABLE proposals
    DROP CONSTRAINT proposals_apply_path_check,
    ADD CONSTRAINT proposals_apply_path_check CHECK (apply_path IN ('auto', 'human')),
    DROP CONSTRAINT proposals_status_check,
    ADD CONSTRAINT proposals_status_check CHECK (status IN ('pending', 'pending_approval', 'applying', 'applied', 'rejected', 'failed'));
