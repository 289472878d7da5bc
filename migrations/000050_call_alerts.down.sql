DROP TABLE rationale_alerts;
DELETE FROM notifications WHERE kind IN ('alert', 'rationale');
ALTER TABLE notifications
    DROP CONSTRAINT notifications_once,
    ADD CONSTRAINT notifications_workspace_id_proposal_id_user_id_channel_key UNIQUE (workspace_id, proposal_id, user_id, channel),
    DROP CONSTRAINT notifications_kind_check,
    ADD CONSTRAINT notifications_kind_check CHECK (kind IN ('card', 'packet'));
