-- name: InsertReceipt :exec
-- In the transaction of the outcome it records; chained later.
INSERT INTO receipts (id, workspace_id, kind, proposal_id, action_class, content, content_hash, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);
