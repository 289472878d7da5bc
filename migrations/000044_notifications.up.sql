-- Approvals that reach people (issue 27, items 1 and 2): a confirm card
-- that waits for its owner, or an approval packet that waits for an
-- approver, notifies them by email and by their signed webhook; the
-- message carries one-time links to a phone-sized page that decides it.
--
-- Nothing here is written by a call: a roll-up feed over the audit log
-- (the 'notifications' row of rollup_feeds; internal/notify) finds the
-- calls that started waiting and queues their notifications, and a sender
-- on every instance delivers what is due, with no transaction open while
-- it sends.

-- What each person wants. No row: email only, at once.
CREATE TABLE notification_preferences (
    workspace_id   uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id        uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email          boolean     NOT NULL DEFAULT true,
    -- Their webhook (a host on the workspace's webhook allowlist), and the
    -- secret its deliveries are signed with (Standard Webhooks, whsec_…).
    webhook_url    text        CHECK (length(webhook_url) <= 2000),
    webhook_secret text        CHECK (webhook_secret ~ '^whsec_[A-Za-z0-9+/=]{32,100}$'),
    -- Quiet hours, minutes of the day in time_zone (start > end wraps
    -- midnight); nothing is sent inside them: it waits for their end.
    quiet_start    smallint    CHECK (quiet_start BETWEEN 0 AND 1439),
    quiet_end      smallint    CHECK (quiet_end BETWEEN 0 AND 1439),
    time_zone      text        NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) <= 64),
    -- 0: one message per call; N: one digest every N minutes.
    digest_minutes integer     NOT NULL DEFAULT 0 CHECK (digest_minutes BETWEEN 0 AND 1440),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id),
    CHECK ((webhook_url IS NULL) = (webhook_secret IS NULL)),
    CHECK ((quiet_start IS NULL) = (quiet_end IS NULL))
);

-- A notification to send: one per person, channel and call.
CREATE TABLE notifications (
    workspace_id    uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    id              bigint      GENERATED ALWAYS AS IDENTITY,
    user_id         uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    channel         text        NOT NULL CHECK (channel IN ('email', 'webhook')),
    kind            text        NOT NULL CHECK (kind IN ('card', 'packet')),
    proposal_id     uuid        NOT NULL,
    approval_id     uuid,
    status          text        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sending', 'sent', 'failed', 'dropped')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    last_error      text        CHECK (length(last_error) <= 500),
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    PRIMARY KEY (workspace_id, id),
    UNIQUE (workspace_id, proposal_id, user_id, channel),
    CHECK ((kind = 'packet') = (approval_id IS NOT NULL))
);
-- The sender's queue: what is due, soonest first.
CREATE INDEX notifications_due_idx ON notifications (next_attempt_at) WHERE status IN ('queued', 'sending');
-- A person's latest, for the settings page.
CREATE INDEX notifications_user_idx ON notifications (workspace_id, user_id, id DESC);

-- A one-time link in a notification: bound to its recipient, the call (and
-- packet) and the exact arguments' hash; it expires, and is used once.
-- Only the SHA-256 of its secret is kept; the workspace is in the link.
CREATE TABLE action_links (
    workspace_id   uuid          NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    token_hash     sha256_digest NOT NULL,
    user_id        uuid          NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    proposal_id    uuid          NOT NULL,
    approval_id    uuid,
    arguments_hash sha256_digest NOT NULL,
    created_at     timestamptz   NOT NULL DEFAULT now(),
    expires_at     timestamptz   NOT NULL,
    used_at        timestamptz,
    used_for       text          CHECK (used_for IN ('approve', 'reject')),
    PRIMARY KEY (workspace_id, token_hash),
    CHECK (expires_at > created_at),
    CHECK ((used_at IS NULL) = (used_for IS NULL))
);
CREATE INDEX action_links_expires_idx ON action_links (expires_at);

ALTER TABLE rollup_feeds DROP CONSTRAINT rollup_feeds_feed_check,
    ADD CONSTRAINT rollup_feeds_feed_check CHECK (feed IN ('evidence', 'audit_events', 'receipts', 'conversation_messages', 'conversation_calls', 'notifications'));
-- The feed starts at the log's head: calls already waiting are not
-- announced again.
INSERT INTO rollup_feeds (feed, folded_to, next_to)
SELECT 'notifications', h.last, h.last FROM (SELECT coalesce(max(id), 0) AS last FROM audit_events) h;
