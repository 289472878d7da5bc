-- name: SearchRecords :many
-- The matches are found through the trigram index first (MATERIALIZED:
-- the planner must not walk the primary key in order hoping that 50
-- matches come early, which reads every record when few match), then
-- the first 50 in order. The index is over the key and the value's text
-- joined by U+001F (migration 58); the second condition keeps a match
-- within one of them.
WITH hits AS MATERIALIZED (
    SELECT collection, key, value, notes, updated_at FROM records
    WHERE workspace_id = $1
      AND (sqlc.narg(collection)::text IS NULL OR collection = sqlc.narg(collection))
      AND (key || E'\x1f' || (value::text)) ILIKE '%' || sqlc.arg(query)::text || '%'
      AND (key ILIKE '%' || sqlc.arg(query)::text || '%' OR value::text ILIKE '%' || sqlc.arg(query)::text || '%')
)
SELECT collection, key, value, notes, updated_at FROM hits
ORDER BY collection, key
LIMIT 50;

-- name: SearchRecordsByKeyPrefix :many
-- records.search of a query too short for a trigram: the records whose
-- key starts with it, case-insensitively (lower() as ILIKE folds), in key
-- order, read through records_key_prefix_idx (migration 26) up to the
-- 50th. In byte order (COLLATE "C") the keys starting with p run from p
-- up to p followed by U+10FFFF, the last code point; only a key that
-- goes on with that noncharacter itself falls outside.
SELECT collection, key, value, notes, updated_at FROM records
WHERE workspace_id = $1
  AND lower(key) COLLATE "C" >= lower(sqlc.arg(prefix)::text)
  AND lower(key) COLLATE "C" < lower(sqlc.arg(prefix)::text) || chr(1114111)
ORDER BY lower(key) COLLATE "C", collection, key
LIMIT 50;

-- name: SearchCollectionByKeyPrefix :many
-- SearchRecordsByKeyPrefix in one collection, which the index checks
-- before the table is read.
SELECT collection, key, value, notes, updated_at FROM records
WHERE workspace_id = $1
  AND lower(key) COLLATE "C" >= lower(sqlc.arg(prefix)::text)
  AND lower(key) COLLATE "C" < lower(sqlc.arg(prefix)::text) || chr(1114111)
  AND collection = $2
ORDER BY lower(key) COLLATE "C", collection, key
LIMIT 50;

-- name: GetRecord :one
SELECT collection, key, value, notes, updated_at FROM records WHERE workspace_id = $1 AND collection = $2 AND key = $3;

-- name: PutRecord :one
INSERT INTO records (workspace_id, collection, key, value) VALUES ($1, $2, $3, $4)
ON CONFLICT (workspace_id, collection, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
RETURNING collection, key, value, notes, updated_at, (xmax = 0) AS created;

-- name: AppendRecordNote :one
UPDATE records SET notes = notes || jsonb_build_array(jsonb_build_object('text', sqlc.arg(text)::text, 'at', now())), updated_at = now()
WHERE workspace_id = $1 AND collection = $2 AND key = $3
RETURNING collection, key, value, notes, updated_at;

-- name: DeleteRecord :one
DELETE FROM records WHERE workspace_id = $1 AND collection = $2 AND key = $3
RETURNING collection, key, value;

-- name: DeleteRecordsByKeys :many
-- Deletes the listed keys of one collection in one statement; the keys it
-- returns are those that existed.
DELETE FROM records
WHERE workspace_id = sqlc.arg(workspace_id) AND collection = sqlc.arg(collection) AND key = ANY (sqlc.arg(keys)::text[])
RETURNING key;
