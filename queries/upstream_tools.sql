-- name: ListUpstreamTools :many
SELECT * FROM upstream_tools ORDER BY upstream, name;

-- name: GetUpstreamTool :one
SELECT * FROM upstream_tools WHERE upstream = $1 AND name = $2;

-- name: GetUpstreamToolForUpdate :one
SELECT * FROM upstream_tools WHERE upstream = $1 AND name = $2 FOR UPDATE;

-- name: InsertUpstreamTool :one
-- A tool seen for the first time: held, or accepted at once when the
-- policy file's accept list names it. Nothing when another instance
-- inserted it first.
INSERT INTO upstream_tools (upstream, name, definition_hash, definition, status, accepted_hash, accepted_definition, accepted_at)
VALUES (sqlc.arg(upstream), sqlc.arg(name), sqlc.arg(definition_hash), sqlc.arg(definition),
        CASE WHEN sqlc.arg(accept)::boolean THEN 'accepted' ELSE 'held' END,
        CASE WHEN sqlc.arg(accept)::boolean THEN sqlc.arg(definition_hash) END,
        CASE WHEN sqlc.arg(accept)::boolean THEN sqlc.arg(definition)::jsonb END,
        CASE WHEN sqlc.arg(accept)::boolean THEN now() END)
ON CONFLICT (upstream, name) DO NOTHING
RETURNING *;

-- name: SeeUpstreamToolDefinition :one
-- The definition the upstream lists now: the tool is accepted only if it
-- is the one accepted.
UPDATE upstream_tools
SET definition_hash = sqlc.arg(definition_hash), definition = sqlc.arg(definition), seen_at = now(),
    status = CASE WHEN accepted_hash IS NOT DISTINCT FROM sqlc.arg(definition_hash) THEN 'accepted' ELSE 'held' END
WHERE upstream = sqlc.arg(upstream) AND name = sqlc.arg(name)
RETURNING *;

-- name: AcceptUpstreamTool :one
-- An admin accepts the definition they reviewed (by its hash): nothing
-- when the upstream changed it again meanwhile.
UPDATE upstream_tools
SET accepted_hash = definition_hash, accepted_definition = definition, accepted_by = sqlc.arg(accepted_by), accepted_at = now(), status = 'accepted'
WHERE upstream = sqlc.arg(upstream) AND name = sqlc.arg(name) AND definition_hash = sqlc.arg(definition_hash)
RETURNING *;
