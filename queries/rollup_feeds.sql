-- The roll-up's feeds (internal/rollup): the watermark of each
-- insert-ordered table the roll-up folds (evidence, audit_events).

-- name: LockRollupFeed :one
-- The feed's row, for the one worker that folds it now; another instance
-- holding it gets no row and skips its turn.
SELECT * FROM rollup_feeds WHERE feed = $1 FOR UPDATE SKIP LOCKED;

-- name: GetRollupFeed :one
SELECT * FROM rollup_feeds WHERE feed = $1;

-- name: RollupWriters :one
-- The transactions writing the table now (gatehouse_table_writers).
SELECT gatehouse_table_writers(to_regclass(sqlc.arg(table_name)::text))::text[] AS writers;

-- name: RollupWritersGone :one
SELECT gatehouse_writers_gone(sqlc.arg(writers)::text[])::boolean AS gone;

-- name: SetRollupFeed :exec
UPDATE rollup_feeds SET folded_to = $2, next_to = $3, next_writers = $4, folded_at = now() WHERE feed = $1;
