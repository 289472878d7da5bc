-- Trust graduation's read and write side: connector tokens (their evidence
-- weighs 0.3), one open violation per flagged receipt, and the indexes the
-- /trust page and the evidence API read by.

-- A connector is a user token whose judgments are weighed as a
-- connector's, not the principal's. Agent tokens are never connectors:
-- their evidence stays model_inferred.
ALTER TABLE api_tokens
    ADD COLUMN connector boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT api_tokens_connector_is_user CHECK (NOT connector OR kind = 'user');

-- A receipt is flagged once at a time; a cleared violation can be flagged
-- again.
CREATE UNIQUE INDEX trust_violations_open_receipt_idx ON trust_violations (receipt_id) WHERE cleared_at IS NULL;
CREATE INDEX trust_violations_recent_idx ON trust_violations (workspace_id, created_at DESC);

-- Evidence about one proposal (an agent records at most one).
CREATE INDEX evidence_proposal_idx ON evidence (workspace_id, proposal_id) WHERE proposal_id IS NOT NULL;

-- Calls a person decided, per class: the median time to a decision.
CREATE INDEX proposals_decided_idx ON proposals (workspace_id, action_class, created_at) WHERE resolved_by_user_id IS NOT NULL;
