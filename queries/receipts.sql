-- name: InsertReceipt :exec
-- In the transaction of the outcome it records; chained later.
INSERT INTO receipts (id, workspace_id, kind, proposal_id, action_class, content, content_hash, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: ListWorkspacesWithUnchainedReceipts :many
-- The sequencer's work list (the partial index receipts_unchained_idx).
SELECT DISTINCT workspace_id FROM receipts WHERE seq IS NULL;

-- name: TryLockReceiptChain :one
-- One sequencer per workspace across all instances: a transaction-scoped
-- advisory lock in the two-key space (class, object), so it never meets the
-- single-key locks that migrations and tests take.
SELECT pg_try_advisory_xact_lock(@class::int4, @object::int4) AS locked;

-- name: GetReceiptChainHead :one
SELECT seq::bigint AS seq, hash FROM receipts
WHERE workspace_id = $1 AND seq IS NOT NULL
ORDER BY seq DESC LIMIT 1;

-- name: ListUnchainedReceipts :many
-- content comes along for the receipts whose content hash the sequencer
-- computes (written on the automatic path without one). No row lock: the
-- workspace's chain lock (TryLockReceiptChain) already makes this
-- sequencer the only writer of unchained receipts (a redaction waits for
-- the chain), and a lock per receipt was a WAL record per call.
SELECT id, content_hash, metadata, (CASE WHEN content_hash IS NULL THEN content END)::jsonb AS content FROM receipts
WHERE workspace_id = $1 AND seq IS NULL
ORDER BY created_at, id
LIMIT $2;

-- name: ChainReceipts :execrows
-- A receipt whose content could not be canonicalised (stored before the
-- arguments were checked strictly) is chained with its content replaced
-- and its metadata marked (contents and metadatas: '' keeps the row's).
UPDATE receipts r SET seq = c.seq, prev_hash = c.prev_hash, hash = c.hash, chained_at = @chained_at,
       content_hash = c.content_hash,
       content = CASE WHEN c.content = '' THEN r.content ELSE c.content::jsonb END,
       metadata = CASE WHEN c.metadata = '' THEN r.metadata ELSE c.metadata::jsonb END
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq,
             unnest(@prev_hashes::bytea[]) AS prev_hash, unnest(@hashes::bytea[]) AS hash,
             unnest(@content_hashes::bytea[]) AS content_hash,
             unnest(@contents::text[]) AS content, unnest(@metadatas::text[]) AS metadata) AS c
WHERE r.id = c.id AND r.workspace_id = @workspace_id AND r.seq IS NULL;

-- name: ListChainedReceipts :many
-- A page of the chain in seq order, after a seq (0 for the start).
SELECT * FROM receipts
WHERE workspace_id = $1 AND seq > @after_seq::bigint
ORDER BY seq
LIMIT $2;

-- name: CountUnchainedReceipts :one
SELECT count(*) AS pending, coalesce(min(created_at), now())::timestamptz AS oldest
FROM receipts WHERE workspace_id = $1 AND seq IS NULL;

-- name: ListRecentReceipts :many
-- Unchained receipts first (newest first), then the chain from its head
-- down. Each part reads its own partial index (receipts_unchained_idx,
-- receipts_workspace_seq_idx) up to the limit, so the page reads at most
-- twice the limit whatever the chain's length; one index over both
-- cannot exist, the chained one being partial.
SELECT r.* FROM (
    (SELECT * FROM receipts u WHERE u.workspace_id = @workspace_id AND u.seq IS NULL
     ORDER BY u.created_at DESC, u.id DESC LIMIT @lim)
    UNION ALL
    (SELECT * FROM receipts c WHERE c.workspace_id = @workspace_id AND c.seq IS NOT NULL
     ORDER BY c.seq DESC LIMIT @lim)
) r
ORDER BY r.seq DESC NULLS FIRST, r.created_at DESC, r.id DESC
LIMIT @lim;

-- name: ListProposalReceipts :many
SELECT * FROM receipts WHERE workspace_id = $1 AND proposal_id = $2 ORDER BY created_at, id;

-- name: GetReceipt :one
SELECT * FROM receipts WHERE id = $1 AND workspace_id = $2;

-- name: GetReceiptForUpdate :one
SELECT * FROM receipts WHERE id = $1 AND workspace_id = $2 FOR UPDATE;

-- name: RedactReceipt :execrows
-- Deletes the content only: content_hash, metadata and the chain fields
-- stay, so the chain still verifies.
UPDATE receipts SET content = NULL, redacted_for = @redacted_for, redacted_at = @redacted_at
WHERE id = @id AND workspace_id = @workspace_id AND content IS NOT NULL AND content_hash IS NOT NULL;

-- name: ListReceiptWorkspaces :many
SELECT id FROM workspaces ORDER BY created_at, id;

-- name: ListChainForVerification :many
-- A page of the chain for a verifier, in seq order: after a seq, through
-- a seq (the head when the verification started), and only the columns
-- the hashes cover.
SELECT id, seq::bigint AS seq, prev_hash, hash, content_hash, metadata, content, redacted_for, (redacted_at IS NOT NULL)::boolean AS redacted
FROM receipts
WHERE workspace_id = @workspace_id AND seq > @after_seq::bigint AND seq <= @through_seq::bigint
ORDER BY seq
LIMIT @page_size;
