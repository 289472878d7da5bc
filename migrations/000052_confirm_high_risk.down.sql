ALTER TABLE workspaces DROP COLUMN confirm_runs_high_risk;
