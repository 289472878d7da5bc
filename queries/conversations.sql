-- name: CreateConversation :one
INSERT INTO conversations (workspace_id, owner_id, title) VALUES ($1, $2, $3) RETURNING *;

-- name: GetConversation :one
-- Owner-scoped: another user's conversation is not found.
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3;

-- name: GetConversationForUpdate :one
SELECT * FROM conversations WHERE id = $1 AND workspace_id = $2 AND owner_id = $3 FOR UPDATE;

-- name: ListConversationActivity :many
-- A page of the owner's conversations by their folded activity
-- (conversation_activity, migration 38), from the position before_at,
-- before_id on when paged: a range of conversation_activity_owner_idx,
-- each row's conversation by its primary key. The list (internal/
-- conversations) adds the lines after the feed's watermark
-- (ListConversationTail) and reads as many more rows as they have
-- conversations.
SELECT sqlc.embed(c), a.active_at AS folded_at
FROM conversation_activity a
JOIN conversations c ON c.id = a.conversation_id AND c.workspace_id = sqlc.arg(workspace_id) AND c.owner_id = sqlc.arg(owner_id)
WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.owner_id = sqlc.arg(owner_id)
  AND (NOT sqlc.arg(paged)::bool OR (a.active_at, a.conversation_id) < (sqlc.arg(before_at)::timestamptz, sqlc.arg(before_id)::uuid))
ORDER BY a.active_at DESC, a.conversation_id DESC
LIMIT sqlc.arg(lim)::int;

-- name: ListConversationTail :many
-- The owner's conversations with lines after the lines feed's watermark
-- (folded: a moment's worth, not folded into conversation_activity
-- yet), each with its last such line's time: messages' primary key and
-- the calls' BRIN index (migration 38) from the watermark on.
SELECT l.conversation_id, max(l.created_at)::timestamptz AS active_at
FROM (SELECT m.conversation_id, m.created_at FROM messages m
      WHERE m.workspace_id = sqlc.arg(workspace_id) AND m.id > sqlc.arg(folded)::bigint
      UNION ALL
      SELECT p.conversation_id, p.created_at FROM proposals p
      WHERE p.workspace_id = sqlc.arg(workspace_id) AND p.conversation_id IS NOT NULL AND p.line_id > sqlc.arg(folded)::bigint) l
JOIN conversations c ON c.id = l.conversation_id AND c.workspace_id = sqlc.arg(workspace_id) AND c.owner_id = sqlc.arg(owner_id)
GROUP BY l.conversation_id;

-- name: ListConversationsByID :many
-- The owner's conversations among ids, by primary key.
SELECT * FROM conversations
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND workspace_id = sqlc.arg(workspace_id) AND owner_id = sqlc.arg(owner_id);

-- name: TranscriptLinesHead :one
-- The last line position drawn (messages and calls share the sequence):
-- the lines feed's candidate, with the transactions writing either table
-- (internal/rollup). A position drawn but not visible yet is one of theirs.
SELECT coalesce(pg_sequence_last_value('messages_id_seq'), 0)::bigint AS head;

-- name: FoldConversationActivity :one
-- The lines in (after, upto] (every workspace's, in position order: the
-- feed is one for the database) folded into their conversations'
-- activity; it says how many conversations moved.
WITH lines AS (
    SELECT m.conversation_id, m.created_at FROM messages m WHERE m.id > sqlc.arg(after)::bigint AND m.id <= sqlc.arg(upto)::bigint
    UNION ALL
    SELECT p.conversation_id, p.created_at FROM proposals p
    WHERE p.line_id > sqlc.arg(after)::bigint AND p.line_id <= sqlc.arg(upto)::bigint AND p.conversation_id IS NOT NULL
), up AS (
    INSERT INTO conversation_activity AS a (conversation_id, workspace_id, owner_id, active_at)
    SELECT c.id, c.workspace_id, c.owner_id, max(l.created_at)
    FROM lines l JOIN conversations c ON c.id = l.conversation_id
    GROUP BY c.id, c.workspace_id, c.owner_id
    ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at WHERE a.active_at < excluded.active_at
    RETURNING 1
)
SELECT count(*)::int AS moved FROM up;

-- name: UpdateConversation :one
UPDATE conversations SET title = $2, permission_mode = $3, updated_at = now() WHERE id = $1 RETURNING *;

