-- name: UpsertPolicyInstance :exec
-- An instance's policy in force, written when it loads its file and on
-- every heartbeat.
INSERT INTO policy_instances (instance_id, hostname, file_path, file_hash, policy_hash, loaded_at, error, error_line, error_at)
VALUES (@instance_id, @hostname, @file_path, @file_hash, @policy_hash, @loaded_at, sqlc.narg(error), sqlc.narg(error_line), sqlc.narg(error_at))
ON CONFLICT (instance_id) DO UPDATE
    SET hostname = EXCLUDED.hostname, file_path = EXCLUDED.file_path, file_hash = EXCLUDED.file_hash, policy_hash = EXCLUDED.policy_hash,
        loaded_at = EXCLUDED.loaded_at, error = EXCLUDED.error, error_line = EXCLUDED.error_line, error_at = EXCLUDED.error_at, seen_at = now();

-- name: ListPolicyInstances :many
-- Every instance that reported, those seen lately first; gone: not seen
-- for gone_after seconds.
SELECT instance_id, hostname, file_path, file_hash, policy_hash, loaded_at, error, error_line, error_at, started_at, seen_at,
       (seen_at < now() - make_interval(secs => @gone_after::int))::boolean AS gone
FROM policy_instances
ORDER BY gone, hostname, instance_id;

-- name: DeletePolicyInstance :exec
DELETE FROM policy_instances WHERE instance_id = $1;

-- name: DeleteStalePolicyInstances :exec
-- Forgets the instances not seen for a week.
DELETE FROM policy_instances WHERE seen_at < now() - interval '7 days';
