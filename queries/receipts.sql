-- name: InsertReceipt :exec
-- In the transaction of the outcome it records; chained later.
INSERT INTO receipts (id, workspace_id, kind, proposal_id, action_class, content, content_hash, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);

-- name: ReceiptsHead :one
-- The last position drawn for a receipt: the sequencer feed's candidate
-- (with the transactions writing receipts, see internal/rollup). A
-- position drawn but not yet visible belongs to one of those.
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('receipts', 'pos')), 0)::bigint AS head;

-- name: ListChainHeadsWithWork :many
-- The workspaces with receipts to chain up to position upto, each with
-- its chain's head (seq 0 and no hash for an empty chain): a probe of
-- receipts_position_idx per workspace after its head's position.
SELECT w.id AS workspace_id, coalesce(h.seq, 0)::bigint AS seq, h.hash, coalesce(h.receipt_pos, 0)::bigint AS receipt_pos
FROM workspaces w
LEFT JOIN LATERAL (SELECT l.seq, l.hash, l.receipt_pos FROM receipt_links l WHERE l.workspace_id = w.id ORDER BY l.seq DESC LIMIT 1) h ON true
WHERE EXISTS (SELECT 1 FROM receipts r WHERE r.workspace_id = w.id AND r.pos > coalesce(h.receipt_pos, 0) AND r.pos <= @upto::bigint);

-- name: GetReceiptChainHead :one
SELECT seq::bigint AS seq, hash, receipt_pos FROM receipt_links
WHERE workspace_id = $1
ORDER BY seq DESC LIMIT 1;

-- name: ListReceiptsToChain :many
-- A workspace's receipts after its head's position, through upto, in
-- position order. content comes along for the receipts whose content hash
-- the sequencer computes (written on the automatic path without one).
SELECT id, pos, content_hash, metadata, (CASE WHEN content_hash IS NULL THEN content END)::jsonb AS content FROM receipts
WHERE workspace_id = @workspace_id AND pos > @after_pos::bigint AND pos <= @upto::bigint
ORDER BY pos
LIMIT @lim;

-- name: ChainReceipts :execrows
-- The links of a batch, in one statement.
INSERT INTO receipt_links (workspace_id, seq, receipt_id, receipt_pos, prev_hash, hash, content_hash, chained_at)
SELECT @workspace_id, c.seq, c.id, c.pos, c.prev_hash, c.hash, c.content_hash, @chained_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@seqs::bigint[]) AS seq, unnest(@positions::bigint[]) AS pos,
             unnest(@prev_hashes::bytea[]) AS prev_hash, unnest(@hashes::bytea[]) AS hash,
             unnest(@content_hashes::bytea[]) AS content_hash) AS c;

-- name: QuarantineReceipt :execrows
-- A receipt whose content could not be canonicalised (stored before the
-- arguments were checked strictly) is chained with its content replaced
-- and its metadata marked (internal/receipts quarantine); rare, and only
-- for receipts written before that check.
UPDATE receipts SET content = @content::jsonb, metadata = @metadata::jsonb, content_hash = @content_hash
WHERE id = @id AND workspace_id = @workspace_id;

-- name: ListChainedReceipts :many
-- A page of the chain in seq order, after a seq (0 for the start).
SELECT r.* FROM receipt_links l
JOIN receipt_rows r ON r.id = l.receipt_id
WHERE l.workspace_id = $1 AND r.workspace_id = $1 AND l.seq > sqlc.arg(after_seq)::bigint
ORDER BY l.seq
LIMIT $2;

-- name: CountUnchainedReceipts :one
-- The receipts after the head's position (after_pos: the few the
-- sequencer has not reached), counted up to 10,000, and the oldest of
-- those: a range of receipts_position_idx in its order. The position is a
-- parameter, not a subquery: the planner then sees how few receipts
-- follow it, where for a position it cannot see it guesses a third of
-- the table, and at 300,000 receipts of a call's size it sorted a
-- sequential scan of the table (150 ms for every /admin/receipts).
SELECT count(*) AS pending, coalesce(min(w.created_at), now())::timestamptz AS oldest
FROM (SELECT r.created_at FROM receipts r
      WHERE r.workspace_id = @workspace_id AND r.pos > @after_pos::bigint
      ORDER BY r.pos
      LIMIT 10000) w;

-- name: ListRecentReceipts :many
-- Unchained receipts first (newest first), then the chain from its head
-- down. Each part reads its own index up to the limit
-- (receipts_position_idx after the head's position, receipt_links' primary
-- key from the head down), so the page reads at most twice the limit
-- whatever the chain's length.
SELECT r.* FROM (
    (SELECT u.* FROM receipt_rows u
     WHERE u.workspace_id = @workspace_id
       AND u.pos > coalesce((SELECT h.receipt_pos FROM receipt_links h WHERE h.workspace_id = @workspace_id ORDER BY h.seq DESC LIMIT 1), 0)
     ORDER BY u.pos DESC LIMIT @lim)
    UNION ALL
    (SELECT c.* FROM receipt_links l JOIN receipt_rows c ON c.id = l.receipt_id
     WHERE l.workspace_id = @workspace_id AND c.workspace_id = @workspace_id
     ORDER BY l.seq DESC LIMIT @lim)
) r
ORDER BY r.seq DESC NULLS FIRST, r.pos DESC
LIMIT @lim;

-- name: ListProposalReceipts :many
SELECT * FROM receipt_rows WHERE workspace_id = $1 AND proposal_id = $2 ORDER BY created_at, id;

-- name: GetReceipt :one
SELECT * FROM receipt_rows WHERE id = $1 AND workspace_id = $2;

-- name: GetReceiptForUpdate :one
-- The receipt, its row locked (a redaction's).
WITH locked AS (SELECT x.id FROM receipts x WHERE x.id = $1 AND x.workspace_id = $2 FOR UPDATE)
SELECT r.* FROM receipt_rows r JOIN locked ON locked.id = r.id
WHERE r.workspace_id = $2;

-- name: RedactReceipt :execrows
-- Deletes the content only: the content hash (the chain's, which the
-- automatic path's receipts hold only in their link), metadata and the
-- link stay, so the chain still verifies.
UPDATE receipts SET content = NULL, content_hash = @content_hash, redacted_for = @redacted_for, redacted_at = @redacted_at
WHERE id = @id AND workspace_id = @workspace_id AND content IS NOT NULL;

-- name: ListReceiptWorkspaces :many
SELECT id FROM workspaces ORDER BY created_at, id;

-- name: ListChainForVerification :many
-- A page of the chain for a verifier, in seq order: after a seq, through
-- a seq (the head when the verification started), and only the columns
-- the hashes cover. Seqs are gapless, so the page's seqs are bounded as
-- well as its length: the planner then expects a page of rows, not the
-- rest of the chain, and reads it in one backend (it chose two parallel
-- workers for each page, four times as long).
SELECT r.id, l.seq::bigint AS seq, l.prev_hash, l.hash, l.content_hash, r.metadata, r.content, r.redacted_for, (r.redacted_at IS NOT NULL)::boolean AS redacted
FROM receipt_links l
JOIN receipts r ON r.id = l.receipt_id
WHERE l.workspace_id = @workspace_id AND r.workspace_id = @workspace_id AND l.seq > sqlc.arg(after_seq)::bigint
  AND l.seq <= least(sqlc.arg(through_seq)::bigint, sqlc.arg(after_seq)::bigint + sqlc.arg(page_size)::integer)
ORDER BY l.seq
LIMIT sqlc.arg(page_size)::integer;
