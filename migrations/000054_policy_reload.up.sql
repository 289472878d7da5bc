-- The policy file reloaded on every instance (issue 28, item 1), and its
-- workspace settings (item 1's precedence: pinned or a default).
--
-- policy_instances: what each running instance has in force, written when
-- it loads or reloads its file and on a heartbeat (30 s), so that /admin
-- shows every instance, the file and policy each runs, the last reload
-- error with its line, and whether they agree. A row not seen for a few
-- minutes is an instance that is gone (shown so); an instance that stops
-- cleanly deletes its row.
CREATE TABLE policy_instances (
    instance_id text PRIMARY KEY CHECK (length(instance_id) BETWEEN 1 AND 200),
    hostname    text NOT NULL,
    -- The file's path on that instance ('' when it runs with none), the
    -- SHA-256 of the bytes in force ('' none) and the tool registry's
    -- hash (the effective policy's version, RecordPolicyVersion's).
    file_path   text NOT NULL,
    file_hash   text NOT NULL,
    policy_hash text NOT NULL,
    loaded_at   timestamptz,
    -- The last reload that failed, until a good file is loaded.
    error       text,
    error_line  integer CHECK (error_line > 0),
    error_at    timestamptz,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((error IS NULL) = (error_at IS NULL)),
    CHECK (error IS NOT NULL OR error_line IS NULL)
);

-- policy_file_settings: what the policy file last set of a workspace
-- setting (its settings: section), so that a value the file does not pin
-- is applied once, when the file introduces or changes it, and the UI may
-- change it afterwards; pinned says the file enforces it (the UI shows it
-- read-only and refuses a change). A setting the file stops naming loses
-- its row.
CREATE TABLE policy_file_settings (
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    setting      text NOT NULL CHECK (setting IN ('auto_approve_high_risk', 'confirm_runs_high_risk', 'internal_domains', 'webhook_allowlist',
                                                  'rationale_min_length', 'rationale_mode', 'escalate_after', 'escalate_to', 'approval_quorums')),
    value        jsonb NOT NULL,
    pinned       boolean NOT NULL,
    applied_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, setting)
);
