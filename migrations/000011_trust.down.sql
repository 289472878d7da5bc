DROP INDEX IF EXISTS proposals_decided_idx;
DROP INDEX IF EXISTS evidence_proposal_idx;
DROP INDEX IF EXISTS trust_violations_recent_idx;
DROP INDEX IF EXISTS trust_violations_open_receipt_idx;
ALTER TABLE api_tokens DROP CONSTRAINT IF EXISTS api_tokens_connector_is_user, DROP COLUMN IF EXISTS connector;
