-- The workspace outbox: mail the email.send tool writes (SMTP delivery is not
-- part of the gateway) and the webhooks webhook.post delivered, with the
-- status the receiver answered. Payment requests record the payments the
-- principal performed themselves; agents can never run payment.initiate.

CREATE TABLE outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('email', 'webhook')),
    recipient       text NOT NULL CHECK (length(recipient) BETWEEN 1 AND 2000),
    subject         text,
    body            text NOT NULL,
    response_status integer CHECK (response_status BETWEEN 100 AND 599),
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- An email has a subject; a webhook row records a delivery, so its status.
    CHECK (kind <> 'email' OR subject IS NOT NULL),
    CHECK ((kind = 'webhook') = (response_status IS NOT NULL))
);

CREATE INDEX outbox_workspace_idx ON outbox (workspace_id, id DESC);

CREATE TABLE payment_requests (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    amount       numeric(18, 2) NOT NULL CHECK (amount > 0),
    currency     text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    payee        text NOT NULL CHECK (length(payee) BETWEEN 1 AND 200),
    status       text NOT NULL CHECK (status IN ('performed')),
    performed_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (status <> 'performed' OR performed_at IS NOT NULL)
);

CREATE INDEX payment_requests_workspace_idx ON payment_requests (workspace_id, created_at DESC);
