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
-- The workspace's conversations with lines the roll-up has not folded
-- into conversation_activity yet (a moment's worth), each with its last
-- such line's time: messages after the messages feed's watermark
-- (messages' primary key) and calls whose created audit row is after the
-- calls feed's (each audit partition's primary key): proposal.created, or
-- for a call that ran at once its one row, proposal.applied or
-- proposal.failed; only a call's created row names its scope. Whose they
-- are is the caller's to check (ListConversationsByID): a join here made
-- PostgreSQL read every conversation of the workspace to meet a handful.
SELECT l.conversation_id, max(l.created_at)::timestamptz AS active_at
FROM (SELECT m.conversation_id, m.created_at FROM messages m
      WHERE m.workspace_id = sqlc.arg(workspace_id) AND m.id > sqlc.arg(messages_folded)::bigint
      UNION ALL
      SELECT CASE WHEN a.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (a.data->>'scope_id')::uuid END, a.created_at
      FROM audit_events a
      WHERE a.workspace_id = sqlc.arg(workspace_id) AND a.id > sqlc.arg(calls_folded)::bigint
        AND a.action IN ('proposal.created', 'proposal.applied', 'proposal.failed') AND a.data->>'scope' = 'conversation') l
WHERE l.conversation_id IS NOT NULL
GROUP BY l.conversation_id;

-- name: ConversationFeedsForList :one
-- Both feeds' watermarks for the conversations list, in one round trip,
-- and the transaction's next statement (ListRecentConversationLines) on a
-- generic plan without JIT: a custom plan of a statement over the audit
-- log is planned for every partition, 3.3 ms at 28 partitions for 0.1 ms
-- of work. The settings as they were come back, for that statement to
-- restore (the list's others plan well only with their values): unlike
-- SetPagePlanning (intent's pages, whose every statement is served by a
-- generic plan), which sets them for the whole transaction, in a round
-- trip of its own.
WITH prior AS MATERIALIZED (
    SELECT current_setting('plan_cache_mode') AS plan_cache_mode, current_setting('jit') AS jit
)
SELECT m.folded_to AS messages_folded, c.folded_to AS calls_folded,
       prior.plan_cache_mode::text AS prior_plan_cache_mode, prior.jit::text AS prior_jit,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode, set_config('jit', 'off', true) AS jit
FROM prior, rollup_feeds m, rollup_feeds c
WHERE m.feed = 'conversation_messages' AND c.feed = 'conversation_calls';

-- name: ListRecentConversationLines :many
-- What ListConversationTail finds, on a generic plan: the workspace's
-- first max_rows messages and audit rows after the feeds' watermarks (an
-- ordered range of each primary key from the watermark, one probe per
-- audit partition however the planner estimates it, reading the rows
-- written since the last fold), and of those the lines in conversations,
-- by conversation. The first row always comes, with how many rows each
-- range kept (conversation_id NULL when no line is one): a range that
-- kept max_rows rows may have stopped short of the head, and the caller
-- then asks ListConversationTail.
WITH calls AS MATERIALIZED (
    SELECT x.action, x.data, x.created_at FROM audit_events x
    WHERE x.workspace_id = sqlc.arg(workspace_id) AND x.id > sqlc.arg(calls_folded)::bigint
    ORDER BY x.id
    LIMIT sqlc.arg(max_rows)::int
), msgs AS MATERIALIZED (
    SELECT m.conversation_id, m.created_at FROM messages m
    WHERE m.workspace_id = sqlc.arg(workspace_id) AND m.id > sqlc.arg(messages_folded)::bigint
    ORDER BY m.id
    LIMIT sqlc.arg(max_rows)::int
), lines AS (
    SELECT l.conversation_id, max(l.created_at)::timestamptz AS active_at
    FROM (SELECT m.conversation_id, m.created_at FROM msgs m
          UNION ALL
          SELECT CASE WHEN a.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (a.data->>'scope_id')::uuid END, a.created_at
          FROM calls a
          WHERE a.action IN ('proposal.created', 'proposal.applied', 'proposal.failed') AND a.data->>'scope' = 'conversation') l
    WHERE l.conversation_id IS NOT NULL
    GROUP BY l.conversation_id
)
SELECT lines.conversation_id, lines.active_at,
       n.calls_read::int AS calls_read, n.messages_read::int AS messages_read
FROM (SELECT (SELECT count(*) FROM calls) AS calls_read, (SELECT count(*) FROM msgs) AS messages_read,
             -- The settings ConversationFeedsForList changed, back for
             -- the transaction's next statements.
             set_config('plan_cache_mode', sqlc.arg(prior_plan_cache_mode)::text, true) AS plan_cache_mode,
             set_config('jit', sqlc.arg(prior_jit)::text, true) AS jit) n
LEFT JOIN lines ON true;

-- name: ListConversationsByID :many
-- The owner's conversations among ids, by primary key.
SELECT * FROM conversations
WHERE id = ANY(sqlc.arg(ids)::uuid[]) AND workspace_id = sqlc.arg(workspace_id) AND owner_id = sqlc.arg(owner_id);

-- name: MessagesHead :one
-- The largest message id visible: the messages feed's candidate.
SELECT coalesce(max(id), 0)::bigint AS head FROM messages;

-- name: FoldConversationMessages :one
-- The messages with ids in (after, upto] (every workspace's: the feed is
-- one for the database) folded into their conversations' activity; it
-- says how many conversations moved.
WITH up AS (
    INSERT INTO conversation_activity AS a (conversation_id, workspace_id, owner_id, active_at)
    SELECT c.id, c.workspace_id, c.owner_id, max(m.created_at)
    FROM messages m JOIN conversations c ON c.id = m.conversation_id
    WHERE m.id > sqlc.arg(after)::bigint AND m.id <= sqlc.arg(upto)::bigint
    GROUP BY c.id, c.workspace_id, c.owner_id
    ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at WHERE a.active_at < excluded.active_at
    RETURNING 1
)
SELECT count(*)::int AS moved FROM up;

-- name: FoldConversationCalls :one
-- The calls created in conversations whose created audit rows (as in
-- ListConversationTail) have ids in (after, upto] (every workspace's, the audit log's global
-- feed) folded into their conversations' activity.
WITH up AS (
    INSERT INTO conversation_activity AS a (conversation_id, workspace_id, owner_id, active_at)
    SELECT c.id, c.workspace_id, c.owner_id, max(e.created_at)
    FROM (SELECT CASE WHEN x.data->>'scope_id' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (x.data->>'scope_id')::uuid END AS conversation_id,
                 x.workspace_id, x.created_at
          FROM audit_events x
          WHERE x.id > sqlc.arg(after)::bigint AND x.id <= sqlc.arg(upto)::bigint
            AND x.action IN ('proposal.created', 'proposal.applied', 'proposal.failed') AND x.data->>'scope' = 'conversation') e
    JOIN conversations c ON c.id = e.conversation_id AND c.workspace_id = e.workspace_id
    GROUP BY c.id, c.workspace_id, c.owner_id
    ON CONFLICT (conversation_id) DO UPDATE SET active_at = excluded.active_at WHERE a.active_at < excluded.active_at
    RETURNING 1
)
SELECT count(*)::int AS moved FROM up;

-- name: UpdateConversation :one
UPDATE conversations SET title = $2, permission_mode = $3, environment = sqlc.narg(environment), updated_at = now() WHERE id = $1 RETURNING *;


-- name: CreateConversationWithID :one
-- A conversation whose id was drawn before it was needed (an MCP
-- session's, created by its first tool call on whichever instance that
-- reaches): the first to insert it creates it; the others find no row
-- and read it.
INSERT INTO conversations (id, workspace_id, owner_id, title) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING RETURNING *;
