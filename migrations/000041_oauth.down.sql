DROP TABLE oauth_refresh_tokens;
DROP TABLE oauth_codes;
-- Without their expiry and audience, grants would be tokens that never
-- expire: they end here, and stay listed as revoked.
UPDATE api_tokens SET revoked_at = now() WHERE oauth_client_id IS NOT NULL AND revoked_at IS NULL;
ALTER TABLE api_tokens
    DROP CONSTRAINT api_tokens_oauth_grant,
    DROP CONSTRAINT api_tokens_one_binding,
    DROP COLUMN notebook_id,
    DROP COLUMN conversation_id,
    DROP COLUMN secret_expires_at,
    DROP COLUMN audience,
    DROP COLUMN oauth_client_id;
DROP TABLE oauth_clients;
