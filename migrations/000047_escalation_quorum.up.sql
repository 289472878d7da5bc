-- Escalation and quorum (issue 27, item 3; docs/policy.md, "Escalation
-- and quorum").
--
-- A workspace may say (on /admin/settings) that a packet still pending
-- after N minutes is escalated to a second role, and how many distinct
-- approvers each role's packets need (quorum: k of the role's holders,
-- none the proposer or the scope's owner); the policy file may say the
-- same per upstream tool. A packet is given its rule when it opens
-- (InsertApproval reads the workspace's in the same statement), so a
-- later change of settings never moves a packet already waiting.
ALTER TABLE workspaces
    ADD COLUMN escalate_after_minutes integer NOT NULL DEFAULT 0 CHECK (escalate_after_minutes BETWEEN 0 AND 10080),
    ADD COLUMN escalate_to_role text CHECK (escalate_to_role ~ '^[a-z][a-z0-9-]{1,62}$'),
    ADD COLUMN approval_quorums jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(approval_quorums) = 'object'),
    ADD CONSTRAINT workspaces_escalation_check CHECK ((escalate_after_minutes = 0) = (escalate_to_role IS NULL));

-- quorum: the distinct approvers the packet needs (requires_witness is a
-- quorum of at least 2). escalate_at / escalate_to: when and to whom it is
-- escalated while still pending (NULL: never); escalated_at: when the
-- sweeper did it. Once escalated, the holders of escalate_to may resolve
-- it as well as its approver_role's.
ALTER TABLE approvals
    ADD COLUMN quorum smallint NOT NULL DEFAULT 1 CHECK (quorum BETWEEN 1 AND 10),
    ADD COLUMN escalate_at timestamptz,
    ADD COLUMN escalate_to text CHECK (escalate_to ~ '^[a-z][a-z0-9-]{1,62}$'),
    ADD COLUMN escalated_at timestamptz,
    -- Who may resolve it now, in one place for every query that asks.
    ADD COLUMN resolver_roles text[] NOT NULL GENERATED ALWAYS AS (
        CASE WHEN escalated_at IS NULL OR escalate_to IS NULL OR escalate_to = approver_role THEN ARRAY[approver_role]
             ELSE ARRAY[approver_role, escalate_to] END) STORED,
    ADD CONSTRAINT approvals_escalation_check CHECK ((escalate_at IS NULL) = (escalate_to IS NULL)),
    ADD CONSTRAINT approvals_escalated_check CHECK (escalated_at IS NULL OR escalate_at IS NOT NULL);

-- The sweeper's read: pending packets due to escalate, soonest first. Few
-- rows (only packets with a rule and not yet escalated).
CREATE INDEX approvals_escalate_idx ON approvals (escalate_at) WHERE status = 'pending' AND escalated_at IS NULL AND escalate_at IS NOT NULL;
