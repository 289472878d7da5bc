-- Tokens that expire and tokens scoped to some tools or to reads. NULL
-- scope_tools is every tool; an empty array is none.
ALTER TABLE api_tokens
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN scope_tools text[],
    ADD COLUMN scope_read_only boolean NOT NULL DEFAULT false;

-- A password reset ends the sessions that signed in before it.
ALTER TABLE users ADD COLUMN password_changed_at timestamptz;
