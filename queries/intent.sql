-- name: SearchIntent :many
-- Calls' rationales in a period, newest first: proposals, and refused
-- calls (which leave only an audit row); q is websearch syntax over the
-- rationale's words ('' matches every call).
SELECT p.id::text AS call_id, p.tool, coalesce(p.action_class, '')::text AS action_class, p.rationale, p.status,
       (p.applied_arguments IS NOT NULL)::boolean AS edited, p.created_at
FROM proposals p
WHERE p.workspace_id = @workspace_id AND p.created_at >= @since AND p.created_at < @until
  AND (@q::text = '' OR to_tsvector('simple', p.rationale) @@ websearch_to_tsquery('simple', @q::text))
UNION ALL
SELECT a.id::text, coalesce(a.data->>'tool', '')::text, coalesce(a.data->>'action_class', '')::text, coalesce(a.data->>'rationale', '')::text,
       'refused'::text, false, a.created_at
FROM audit_events a
WHERE a.workspace_id = @workspace_id AND a.action = 'proposal.refused' AND a.created_at >= @since AND a.created_at < @until
  AND (@q::text = '' OR to_tsvector('simple', coalesce(a.data->>'rationale', '')) @@ websearch_to_tsquery('simple', @q::text))
ORDER BY created_at DESC
LIMIT @max_rows;

-- name: IntentGroups :many
-- The same calls counted by action class and tool: how many, how many
-- refused (rejected, failed, or refused at the gate) and how many edited
-- before they ran.
WITH calls AS (
    SELECT p.tool, coalesce(p.action_class, '') AS action_class, p.status IN ('rejected', 'failed') AS refused, p.applied_arguments IS NOT NULL AS edited
    FROM proposals p
    WHERE p.workspace_id = @workspace_id AND p.created_at >= @since AND p.created_at < @until
      AND (@q::text = '' OR to_tsvector('simple', p.rationale) @@ websearch_to_tsquery('simple', @q::text))
    UNION ALL
    SELECT coalesce(a.data->>'tool', ''), coalesce(a.data->>'action_class', ''), true, false
    FROM audit_events a
    WHERE a.workspace_id = @workspace_id AND a.action = 'proposal.refused' AND a.created_at >= @since AND a.created_at < @until
      AND (@q::text = '' OR to_tsvector('simple', coalesce(a.data->>'rationale', '')) @@ websearch_to_tsquery('simple', @q::text))
)
SELECT action_class::text AS action_class, tool::text AS tool, count(*)::int AS calls,
       (count(*) FILTER (WHERE refused))::int AS refused, (count(*) FILTER (WHERE edited))::int AS edited
FROM calls
GROUP BY action_class, tool
ORDER BY calls DESC, action_class, tool;

-- name: CountRationaleWarnings :one
-- Calls accepted with a missing or short rationale (warn mode) in a period.
SELECT count(*)::int FROM audit_events
WHERE workspace_id = @workspace_id AND action IN ('proposal.created', 'proposal.refused') AND created_at >= @since AND created_at < @until
  AND (data->>'rationale_warning')::boolean;
