DELETE FROM proposals WHERE notebook_id IS NOT NULL;
DROP INDEX proposals_owner_idx;
ALTER TABLE proposals
    DROP CONSTRAINT proposals_one_scope,
    DROP CONSTRAINT proposals_disposition_check,
    ADD CONSTRAINT proposals_disposition_check CHECK (disposition IN ('auto-run', 'auto-apply', 'propose')),
    ALTER COLUMN conversation_id SET NOT NULL,
    ALTER COLUMN permission_mode SET NOT NULL,
    DROP COLUMN trust_level,
    DROP COLUMN owner_id,
    DROP COLUMN notebook_id;
DROP TABLE notebooks;
