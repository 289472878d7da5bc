-- ADR-036's execution gate, as an explicit opt-in (issue 31, item 4): a
-- high-risk call sent with confirm: true runs without an approver packet
-- where the workspace says so (off by default; /admin/settings, audited).
-- It waives the risk gate only: a contract's human gating, a destructive
-- call's owner, the principal, a witness or any other layer still hold.
ALTER TABLE workspaces ADD COLUMN confirm_runs_high_risk boolean NOT NULL DEFAULT false;
