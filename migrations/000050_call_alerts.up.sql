-- Alerts (issue 31, item 2; the four authority classes' "alerting:
-- on_call: every-execution, on_failure: every-failure", and ADR-036's
-- alert per caller that leaves out a rationale in warn mode).
--
-- Two more kinds of notification, to the workspace's admins, through the
-- same channels, sender and preferences (docs/notifications.md):
-- - alert: an irreversible call was executed or failed;
-- - rationale: in rationale warn mode, a caller's first call of the UTC
--   day accepted without the rationale strict mode requires.
-- A person may be told of one call both as a packet (to decide it) and as
-- an alert (it ran): the kind joins the key.
ALTER TABLE notifications
    DROP CONSTRAINT notifications_kind_check,
    ADD CONSTRAINT notifications_kind_check CHECK (kind IN ('card', 'packet', 'alert', 'rationale')),
    DROP CONSTRAINT notifications_workspace_id_proposal_id_user_id_channel_key,
    ADD CONSTRAINT notifications_once UNIQUE (workspace_id, proposal_id, user_id, channel, kind);

-- Which callers were alerted for which day (a rationale alert is sent
-- once per caller and day): written by the notifications fold only.
CREATE TABLE rationale_alerts (
    workspace_id uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- The agent token, or the person for a call made without one.
    caller       uuid        NOT NULL,
    day          date        NOT NULL,
    proposal_id  uuid        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, caller, day)
);
