-- name: InsertEvidence :exec
INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight,
                      receipt_id, proposal_id, recorded_by, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: HasOpenViolation :one
-- Read with the decision, from the rows as they are now.
SELECT EXISTS (SELECT 1 FROM trust_violations WHERE workspace_id = $1 AND action_class = $2 AND cleared_at IS NULL);
