-- Shadow rules (issue 28, item 3): an override of the policy file marked
-- mode: shadow is not enforced; every live call of its tool is also
-- decided under it, and what it would have decided is kept in the call's
-- audit row (data.shadow: rule, state, kind) when it differs. Nothing is
-- added to a call's statements: a roll-up (the 'shadow_rules' feed over
-- audit_events ids, internal/policyfile) folds those rows into counts per
-- workspace, rule and kind, off the call path, and the policy page reads
-- the counts plus the rows the roll-up has not folded yet.

-- The rules seen, by the hash of the declaration each makes (a rule whose
-- content changes is a new rule, counted from zero), with when an
-- instance first loaded it: the counts run from then.
CREATE TABLE shadow_rules (
    rule     text PRIMARY KEY CHECK (rule ~ '^[0-9a-f]{16}$'),
    tool     text NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now()
);

-- What each rule would have changed, per workspace: newly-asks (it would
-- now ask a person), newly-allowed (it would no longer ask), newly-blocked
-- and restated (asks someone else).
CREATE TABLE shadow_counts (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    rule         text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('newly-asks', 'newly-allowed', 'newly-blocked', 'restated')),
    calls        bigint NOT NULL DEFAULT 0 CHECK (calls >= 0),
    PRIMARY KEY (workspace_id, rule, kind)
);

-- The feed starts at the log's head: no earlier row has a shadow verdict.
ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls', 'notifications', 'audit_export',
                                                          'shadow_rules'));
INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'shadow_rules', h.last, h.last FROM (SELECT coalesce(max(id), 0) AS last FROM audit_events) h;
