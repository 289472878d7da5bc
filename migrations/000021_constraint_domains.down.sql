ALTER TABLE proposals ALTER COLUMN arguments SET COMPRESSION default, ALTER COLUMN result SET COMPRESSION default,
    ALTER COLUMN decision SET COMPRESSION default, ALTER COLUMN effect_decision SET COMPRESSION default,
    ALTER COLUMN decision_input SET COMPRESSION default;
ALTER TABLE receipts ALTER COLUMN content SET COMPRESSION default;
ALTER TABLE audit_events ALTER COLUMN data SET COMPRESSION default;

ALTER TABLE proposals
    ALTER COLUMN proposed_by_kind TYPE text, ADD CONSTRAINT proposals_proposed_by_kind_check CHECK ((proposed_by_kind = ANY (ARRAY['user'::text, 'agent'::text]))),
    ALTER COLUMN effect TYPE text, ADD CONSTRAINT proposals_effect_check CHECK ((effect = ANY (ARRAY['read'::text, 'mutate'::text, 'destructive'::text]))),
    ALTER COLUMN permission_mode TYPE text, ADD CONSTRAINT proposals_permission_mode_check CHECK ((permission_mode = ANY (ARRAY['approve'::text, 'auto'::text]))),
    ALTER COLUMN trust_level TYPE text, ADD CONSTRAINT proposals_trust_level_check CHECK ((trust_level = ANY (ARRAY['cautious'::text, 'trusted'::text, 'autonomous'::text]))),
    ALTER COLUMN disposition TYPE text, ADD CONSTRAINT proposals_disposition_check CHECK ((disposition = ANY (ARRAY['auto-run'::text, 'auto-apply'::text, 'propose'::text, 'auto'::text, 'confirm'::text, 'gated'::text]))),
    ALTER COLUMN authority TYPE text, ADD CONSTRAINT proposals_authority_check CHECK ((authority = ANY (ARRAY['read'::text, 'write-idempotent'::text, 'write-non-idempotent'::text, 'irreversible'::text]))),
    ALTER COLUMN risk TYPE text, ADD CONSTRAINT proposals_risk_check CHECK ((risk = ANY (ARRAY['low'::text, 'medium'::text, 'high'::text]))),
    ALTER COLUMN state TYPE text, ADD CONSTRAINT proposals_state_check CHECK ((state = ANY (ARRAY['allowed'::text, 'allowed_with_constraints'::text, 'review_required'::text, 'deferred'::text, 'human_only'::text, 'blocked'::text]))),
    ALTER COLUMN status TYPE text, ADD CONSTRAINT proposals_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'pending_approval'::text, 'applying'::text, 'applied'::text, 'rejected'::text, 'failed'::text, 'expired'::text]))),
    ALTER COLUMN apply_path TYPE text, ADD CONSTRAINT proposals_apply_path_check CHECK ((apply_path = ANY (ARRAY['auto'::text, 'human'::text, 'approval'::text]))),
    ALTER COLUMN rationale TYPE text, ADD CONSTRAINT proposals_rationale_check CHECK ((char_length(rationale) <= 500)),
    ALTER COLUMN constraints TYPE jsonb, ADD CONSTRAINT proposals_constraints_check CHECK ((jsonb_typeof(constraints) = 'array'::text));

ALTER TABLE audit_events
    ALTER COLUMN actor_kind TYPE text, ADD CONSTRAINT audit_events_actor_kind_check CHECK ((actor_kind = ANY (ARRAY['user'::text, 'agent'::text, 'system'::text]))),
    ALTER COLUMN action TYPE text, ADD CONSTRAINT audit_events_action_check CHECK ((action ~ '^[a-z_]+(\.[a-z_]+)+$'::text));

ALTER TABLE messages
    ALTER COLUMN role TYPE text, ADD CONSTRAINT messages_role_check CHECK ((role = ANY (ARRAY['user'::text, 'assistant'::text, 'tool'::text, 'notice'::text]))),
    ALTER COLUMN content TYPE text, ADD CONSTRAINT messages_content_check CHECK ((length(content) <= 20000));

ALTER TABLE receipts
    ALTER COLUMN kind TYPE text, ADD CONSTRAINT receipts_kind_check CHECK ((kind = ANY (ARRAY['execution'::text, 'refusal'::text, 'correction'::text, 'expiry'::text, 'setting_change'::text, 'role_change'::text, 'violation'::text, 'redaction'::text]))),
    ALTER COLUMN metadata TYPE jsonb, ADD CONSTRAINT receipts_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    ALTER COLUMN seq TYPE bigint, ADD CONSTRAINT receipts_seq_check CHECK ((seq > 0)),
    ALTER COLUMN prev_hash TYPE bytea, ADD CONSTRAINT receipts_prev_hash_check CHECK (((prev_hash IS NULL) OR (length(prev_hash) = 32))),
    ALTER COLUMN hash TYPE bytea, ADD CONSTRAINT receipts_hash_check CHECK (((hash IS NULL) OR (length(hash) = 32))),
    ALTER COLUMN content_hash TYPE bytea, ADD CONSTRAINT receipts_content_hash_check CHECK (((content_hash IS NULL) OR (length(content_hash) = 32))),
    ALTER COLUMN redacted_for TYPE text, ADD CONSTRAINT receipts_redacted_for_check CHECK (((redacted_for IS NULL) OR ((length(redacted_for) >= 1) AND (length(redacted_for) <= 500))));

DROP DOMAIN proposal_kind;
DROP DOMAIN actor_kind;
DROP DOMAIN tool_effect;
DROP DOMAIN permission_mode;
DROP DOMAIN trust_level;
DROP DOMAIN disposition;
DROP DOMAIN tool_authority;
DROP DOMAIN risk_level;
DROP DOMAIN decision_state;
DROP DOMAIN proposal_status;
DROP DOMAIN apply_path;
DROP DOMAIN rationale_text;
DROP DOMAIN jsonb_array;
DROP DOMAIN audit_action;
DROP DOMAIN message_role;
DROP DOMAIN message_text;
DROP DOMAIN receipt_kind;
DROP DOMAIN jsonb_object;
DROP DOMAIN chain_seq;
DROP DOMAIN sha256_digest;
DROP DOMAIN redaction_reason;
