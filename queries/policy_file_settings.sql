-- name: ListPolicyFileSettings :many
-- What the policy file last set of the workspace's settings.
SELECT setting, value, pinned FROM policy_file_settings WHERE workspace_id = $1;

-- name: PutPolicyFileSetting :exec
INSERT INTO policy_file_settings (workspace_id, setting, value, pinned)
VALUES (@workspace_id, @setting, @value, @pinned)
ON CONFLICT (workspace_id, setting) DO UPDATE SET value = EXCLUDED.value, pinned = EXCLUDED.pinned, applied_at = now();

-- name: DeletePolicyFileSettingsExcept :exec
-- Forgets the settings the file no longer names.
DELETE FROM policy_file_settings WHERE workspace_id = @workspace_id AND NOT (setting = ANY (@keep::text[]));
