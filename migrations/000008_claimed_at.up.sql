-- When a proposal was claimed (pending → applying): a claim that never
-- finished (a crash between claim and result) is surfaced for review.
ALTER TABLE proposals ADD COLUMN claimed_at timestamptz;
UPDATE proposals SET claimed_at = coalesce(resolved_at, created_at) WHERE status IN ('applying', 'applied', 'failed');
CREATE INDEX proposals_applying_idx ON proposals (workspace_id, claimed_at) WHERE status = 'applying';
