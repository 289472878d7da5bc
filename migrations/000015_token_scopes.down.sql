ALTER TABLE users DROP COLUMN password_changed_at;

ALTER TABLE api_tokens
    DROP COLUMN scope_read_only,
    DROP COLUMN scope_tools,
    DROP COLUMN expires_at;
