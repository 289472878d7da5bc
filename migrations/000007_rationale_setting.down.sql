ALTER TABLE workspaces DROP COLUMN rationale_min_length;
