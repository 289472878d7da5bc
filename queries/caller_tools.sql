-- name: ListUnreportedCalls :many
-- The sweeper: caller-executed calls claimed before the cut-off (their
-- execution ticket expired) that their caller never reported, in every
-- workspace (the partial index of applying calls): the policy file's
-- caller tools, and the calls whose caller declared the tool with them.
SELECT id, workspace_id FROM proposals
WHERE status = 'applying' AND claimed_at < sqlc.arg(cutoff)
  AND (tool = ANY(sqlc.arg(tools)::text[]) OR caller_declaration IS NOT NULL)
ORDER BY claimed_at
LIMIT sqlc.arg(max_rows);
