DROP INDEX proposals_owner_time_idx;
DROP INDEX proposals_waiting_idx;
CREATE INDEX proposals_owner_idx ON proposals (owner_id);
