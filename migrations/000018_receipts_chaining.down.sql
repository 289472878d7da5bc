ALTER TABLE receipts ADD CONSTRAINT receipts_workspace_id_seq_key UNIQUE (workspace_id, seq);
DROP INDEX IF EXISTS receipts_workspace_seq_idx;
ALTER TABLE receipts RESET (fillfactor);
