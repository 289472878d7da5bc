DROP INDEX proposals_applying_idx;
ALTER TABLE proposals DROP COLUMN claimed_at;
