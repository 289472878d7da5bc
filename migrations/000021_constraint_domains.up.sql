-- CHECK constraints on the tables every call writes (proposals, messages,
-- audit_events, receipts) become domains: the same rules, checked where
-- the value is typed instead of per row by the table.
--
-- Why: PostgreSQL reads a table's CHECK expressions from their stored
-- text and plans them again in every statement that writes the table
-- (ExecConstraints -> stringToNode, once per statement, not per session).
-- With 30 of them on the four tables an auto-applied call writes, that was
-- about 15 % of the database's CPU for the call (perf, make bench). A
-- domain's constraints are parsed once per session and cached with the
-- type. The rules that relate two columns stay table CHECKs, and so does
-- receipts.content's (a JSON object or NULL): clients send that nullable
-- column as bytes, which a jsonb domain unknown to the driver would take
-- as jsonb's binary form.
--
-- The columns keep their base types (text, jsonb, bigint, bytea) as far as
-- queries and clients see: a domain is its base type with a rule.
CREATE DOMAIN proposal_kind AS text CHECK (VALUE IN ('user', 'agent'));
CREATE DOMAIN actor_kind AS text CHECK (VALUE IN ('user', 'agent', 'system'));
CREATE DOMAIN tool_effect AS text CHECK (VALUE IN ('read', 'mutate', 'destructive'));
CREATE DOMAIN permission_mode AS text CHECK (VALUE IN ('approve', 'auto'));
CREATE DOMAIN trust_level AS text CHECK (VALUE IN ('cautious', 'trusted', 'autonomous'));
CREATE DOMAIN disposition AS text CHECK (VALUE IN ('auto-run', 'auto-apply', 'propose', 'auto', 'confirm', 'gated'));
CREATE DOMAIN tool_authority AS text CHECK (VALUE IN ('read', 'write-idempotent', 'write-non-idempotent', 'irreversible'));
CREATE DOMAIN risk_level AS text CHECK (VALUE IN ('low', 'medium', 'high'));
CREATE DOMAIN decision_state AS text CHECK (VALUE IN ('allowed', 'allowed_with_constraints', 'review_required', 'deferred', 'human_only', 'blocked'));
CREATE DOMAIN proposal_status AS text CHECK (VALUE IN ('pending', 'pending_approval', 'applying', 'applied', 'rejected', 'failed', 'expired'));
CREATE DOMAIN apply_path AS text CHECK (VALUE IN ('auto', 'human', 'approval'));
CREATE DOMAIN rationale_text AS text CHECK (char_length(VALUE) <= 500);
CREATE DOMAIN jsonb_array AS jsonb CHECK (jsonb_typeof(VALUE) = 'array');
CREATE DOMAIN audit_action AS text CHECK (VALUE ~ '^[a-z_]+(\.[a-z_]+)+$');
CREATE DOMAIN message_role AS text CHECK (VALUE IN ('user', 'assistant', 'tool', 'notice'));
CREATE DOMAIN message_text AS text CHECK (length(VALUE) <= 20000);
CREATE DOMAIN receipt_kind AS text CHECK (VALUE IN ('execution', 'refusal', 'correction', 'expiry', 'setting_change', 'role_change', 'violation', 'redaction'));
CREATE DOMAIN jsonb_object AS jsonb CHECK (jsonb_typeof(VALUE) = 'object');
CREATE DOMAIN chain_seq AS bigint CHECK (VALUE > 0);
CREATE DOMAIN sha256_digest AS bytea CHECK (length(VALUE) = 32);
CREATE DOMAIN redaction_reason AS text CHECK (length(VALUE) BETWEEN 1 AND 500);

ALTER TABLE proposals
    DROP CONSTRAINT proposals_proposed_by_kind_check, ALTER COLUMN proposed_by_kind TYPE proposal_kind,
    DROP CONSTRAINT proposals_effect_check, ALTER COLUMN effect TYPE tool_effect,
    DROP CONSTRAINT proposals_permission_mode_check, ALTER COLUMN permission_mode TYPE permission_mode,
    DROP CONSTRAINT proposals_trust_level_check, ALTER COLUMN trust_level TYPE trust_level,
    DROP CONSTRAINT proposals_disposition_check, ALTER COLUMN disposition TYPE disposition,
    DROP CONSTRAINT proposals_authority_check, ALTER COLUMN authority TYPE tool_authority,
    DROP CONSTRAINT proposals_risk_check, ALTER COLUMN risk TYPE risk_level,
    DROP CONSTRAINT proposals_state_check, ALTER COLUMN state TYPE decision_state,
    DROP CONSTRAINT proposals_status_check, ALTER COLUMN status TYPE proposal_status,
    DROP CONSTRAINT proposals_apply_path_check, ALTER COLUMN apply_path TYPE apply_path,
    DROP CONSTRAINT proposals_rationale_check, ALTER COLUMN rationale TYPE rationale_text,
    DROP CONSTRAINT proposals_constraints_check, ALTER COLUMN constraints TYPE jsonb_array;
ALTER TABLE audit_events
    DROP CONSTRAINT audit_events_actor_kind_check, ALTER COLUMN actor_kind TYPE actor_kind,
    DROP CONSTRAINT audit_events_action_check, ALTER COLUMN action TYPE audit_action;
ALTER TABLE messages
    DROP CONSTRAINT messages_role_check, ALTER COLUMN role TYPE message_role,
    DROP CONSTRAINT messages_content_check, ALTER COLUMN content TYPE message_text;
ALTER TABLE receipts
    DROP CONSTRAINT receipts_kind_check, ALTER COLUMN kind TYPE receipt_kind,
    DROP CONSTRAINT receipts_metadata_check, ALTER COLUMN metadata TYPE jsonb_object,
    DROP CONSTRAINT receipts_seq_check, ALTER COLUMN seq TYPE chain_seq,
    DROP CONSTRAINT receipts_prev_hash_check, ALTER COLUMN prev_hash TYPE sha256_digest,
    DROP CONSTRAINT receipts_hash_check, ALTER COLUMN hash TYPE sha256_digest,
    DROP CONSTRAINT receipts_content_hash_check, ALTER COLUMN content_hash TYPE sha256_digest,
    DROP CONSTRAINT receipts_redacted_for_check, ALTER COLUMN redacted_for TYPE redaction_reason;

-- Large JSON (the decision, its input, a receipt's content) is compressed
-- with lz4 where the server has it: the same ratio class as pglz at a
-- fraction of the CPU. Without lz4 support the columns keep pglz.
DO $$
BEGIN
    ALTER TABLE proposals ALTER COLUMN arguments SET COMPRESSION lz4, ALTER COLUMN result SET COMPRESSION lz4,
        ALTER COLUMN decision SET COMPRESSION lz4, ALTER COLUMN effect_decision SET COMPRESSION lz4,
        ALTER COLUMN decision_input SET COMPRESSION lz4;
    ALTER TABLE receipts ALTER COLUMN content SET COMPRESSION lz4;
    ALTER TABLE audit_events ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available: large JSON stays compressed with pglz';
END $$;
