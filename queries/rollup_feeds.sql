-- The roll-up's feeds (internal/rollup): the watermark of each
-- insert-ordered table the roll-up folds (evidence, audit_events).

-- name: TryHoldRollupFeed :one
-- Holds the feed for the one worker that folds it now, to the end of the
-- transaction; false: another worker holds it (and this one skips its
-- turn). A transaction-scoped advisory lock, not a row lock: a turn with
-- nothing to fold then writes nothing (a row lock writes WAL and takes a
-- transaction id, on every turn of every feed, idle or not). Read the
-- feed's row after it, in a statement of its own, so the snapshot sees
-- what the last holder committed.
--
-- generic: the turn's statements use generic plans, without JIT
-- compilation (plan_cache_mode and jit, to the end of the transaction;
-- see rollup.Feed.GenericPlans).
SELECT pg_try_advisory_xact_lock(hashtext('gatehouse.rollup_feeds'), hashtext(sqlc.arg(feed)::text))::boolean AS held,
       set_config('plan_cache_mode', CASE WHEN sqlc.arg(generic)::boolean THEN 'force_generic_plan' ELSE current_setting('plan_cache_mode') END, true)::text AS plan_cache_mode,
       set_config('jit', CASE WHEN sqlc.arg(generic)::boolean THEN 'off' ELSE current_setting('jit') END, true)::text AS jit;

-- name: GetRollupFeed :one
SELECT * FROM rollup_feeds WHERE feed = $1;

-- name: RollupWriters :one
-- The transactions writing the table now (gatehouse_table_writers).
SELECT gatehouse_table_writers(to_regclass(sqlc.arg(table_name)::text))::text[] AS writers;

-- name: RollupWritersGone :one
SELECT gatehouse_writers_gone(sqlc.arg(writers)::text[])::boolean AS gone;

-- name: SetRollupFeed :exec
UPDATE rollup_feeds SET folded_to = $2, next_to = $3, next_writers = $4, folded_at = now() WHERE feed = $1;
