-- name: CountRate :one
-- Counts one call in the bucket's current window and returns the count.
INSERT INTO rate_counters (bucket, window_start, count, expires_at)
VALUES ($1, $2, 1, $3)
ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_counters.count + 1
RETURNING count;

-- name: DeleteExpiredRateCounters :execrows
DELETE FROM rate_counters WHERE expires_at <= now();

-- name: GetRateCount :one
-- The count in a bucket's window so far (0 when none).
SELECT coalesce((SELECT count FROM rate_counters WHERE bucket = $1 AND window_start = $2), 0)::int AS count;

-- name: UncountRate :exec
-- Takes back one call counted in the bucket's window (a sign-in attempt
-- that turned out right).
UPDATE rate_counters SET count = count - 1 WHERE bucket = $1 AND window_start = $2 AND count > 0;

-- name: AddRates :many
-- Adds what one instance counted in memory since it last said so
-- (internal/ratelimit) to the buckets' shared windows, and returns every
-- window's count across instances. Rows are taken in the buckets' order,
-- so two instances adding to the same buckets never deadlock.
INSERT INTO rate_counters (bucket, window_start, count, expires_at)
SELECT unnest(@buckets::text[]), unnest(@window_starts::timestamptz[]), unnest(@deltas::int[]), unnest(@expires_ats::timestamptz[])
ORDER BY 1, 2
ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_counters.count + excluded.count
RETURNING bucket, window_start, count;
