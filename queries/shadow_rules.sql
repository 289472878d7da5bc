-- name: NoteShadowRules :exec
-- The shadow rules in force, remembered from the first time an instance
-- loaded each.
INSERT INTO shadow_rules (rule, tool)
SELECT unnest(sqlc.arg(rules)::text[]), unnest(sqlc.arg(tools)::text[])
ON CONFLICT (rule) DO NOTHING;

-- name: ListShadowRules :many
SELECT rule, tool, added_at FROM shadow_rules WHERE rule = ANY (@rules::text[]);

-- name: FoldShadowCounts :exec
-- Folds the shadow verdicts of the audit rows in (after, upto] (a call's
-- created row, or the one row of a call that ran at once) into the
-- counts, in every workspace.
INSERT INTO shadow_counts AS c (workspace_id, rule, kind, calls)
SELECT a.workspace_id, a.data->'shadow'->>'rule', a.data->'shadow'->>'kind', count(*)
FROM audit_events a
WHERE a.id > @after AND a.id <= @upto AND a.action IN ('proposal.created', 'proposal.refused', 'proposal.applied', 'proposal.failed') AND a.data ? 'shadow'
GROUP BY 1, 2, 3
ON CONFLICT (workspace_id, rule, kind) DO UPDATE SET calls = c.calls + EXCLUDED.calls;

-- name: ShadowCounts :many
-- The workspace's counts per rule and kind: what the roll-up folded plus
-- the audit rows after its watermark, in one snapshot.
WITH w AS (SELECT folded_to FROM rollup_feeds WHERE feed = 'shadow_rules')
SELECT t.rule::text AS rule, t.kind::text AS kind, sum(t.calls)::bigint AS calls
FROM (
    SELECT c.rule, c.kind, c.calls FROM shadow_counts c WHERE c.workspace_id = @workspace_id AND c.rule = ANY (@rules::text[])
    UNION ALL
    SELECT a.data->'shadow'->>'rule', a.data->'shadow'->>'kind', 1
    FROM audit_events a, w
    WHERE a.workspace_id = @workspace_id AND a.id > w.folded_to AND a.action IN ('proposal.created', 'proposal.refused', 'proposal.applied', 'proposal.failed') AND a.data ? 'shadow'
      AND a.data->'shadow'->>'rule' = ANY (@rules::text[])
) t
GROUP BY t.rule, t.kind;
