package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
)

// BatchSize is the most receipts one sequencer transaction chains.
const BatchSize = 1000

// lockClass is the advisory lock class of the sequencers ("RCPT"); the
// object is derived from the workspace id (see chainLockObject).
const lockClass int32 = 0x52435054

// chainLockObject is the advisory lock object of a workspace's chain: the
// first four bytes of sha256(workspace id). Two workspaces that share it
// only take turns.
func chainLockObject(ws uuid.UUID) int32 {
	sum := sha256.Sum256(ws[:])
	return int32(binary.BigEndian.Uint32(sum[:4]))
}

// Sequence chains the receipts that wait for it, in every workspace, and
// returns how many it chained. For each workspace it takes the
// workspace's advisory lock in a transaction (skipping the workspace when
// another sequencer, on any instance, holds it), reads the head, and gives
// the next receipts in (created_at, id) order seq head+1…, prev_hash and
// hash, at most BatchSize per transaction. Seq stays gapless: a batch
// commits whole or not at all. Calls never wait for it: receipts are
// written unchained with their outcomes.
func Sequence(ctx context.Context, pool *pgxpool.Pool, now time.Time) (int, error) {
	q := db.New(pool)
	workspaces, err := q.ListWorkspacesWithUnchainedReceipts(ctx)
	if err != nil {
		return 0, fmt.Errorf("receipts: sequence: %w", err)
	}
	total := 0
	var errs []error
	for _, ws := range workspaces {
		for {
			n, err := chainBatch(ctx, pool, ws, now)
			total += n
			if err != nil {
				errs = append(errs, err)
			}
			if err != nil || n < BatchSize || ctx.Err() != nil {
				break
			}
		}
	}
	return total, errors.Join(errs...)
}

// chainBatch chains up to BatchSize of a workspace's receipts in one
// transaction; 0 when another sequencer holds the workspace.
func chainBatch(ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID, now time.Time) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("receipts: sequence %s: begin: %w", ws, err)
	}
	defer tx.Rollback(ctx)
	q := db.New(tx)
	locked, err := q.TryLockReceiptChain(ctx, db.TryLockReceiptChainParams{Class: lockClass, Object: chainLockObject(ws)})
	if err != nil {
		return 0, fmt.Errorf("receipts: sequence %s: lock: %w", ws, err)
	}
	if !locked {
		return 0, nil
	}
	// Read under the lock: every earlier holder has committed by now.
	head, prev := int64(0), GenesisHash
	switch h, err := q.GetReceiptChainHead(ctx, ws); {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return 0, fmt.Errorf("receipts: sequence %s: head: %w", ws, err)
	default:
		head, prev = h.Seq, h.Hash
	}
	rows, err := q.ListUnchainedReceipts(ctx, db.ListUnchainedReceiptsParams{WorkspaceID: ws, Limit: BatchSize})
	if err != nil {
		return 0, fmt.Errorf("receipts: sequence %s: select: %w", ws, err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	arg := db.ChainReceiptsParams{WorkspaceID: ws, ChainedAt: &now,
		Ids: make([]uuid.UUID, len(rows)), Seqs: make([]int64, len(rows)), PrevHashes: make([][]byte, len(rows)), Hashes: make([][]byte, len(rows)),
		ContentHashes: make([][]byte, len(rows)), Contents: make([]string, len(rows)), Metadatas: make([]string, len(rows))}
	for i, r := range rows {
		seq := head + int64(i) + 1
		if r.ContentHash == nil {
			// The content hash is computed here, in the batch, from the
			// content as stored.
			var cerr error
			if r.ContentHash, cerr = ContentHash(json.RawMessage(r.Content)); cerr != nil {
				// Stored before every path checked its JSON strictly: one
				// receipt must not stop the chain, so it is chained kept
				// as text, its metadata saying so (see quarantine).
				q, err := quarantine(r.Content, r.Metadata, cerr)
				if err != nil {
					return 0, fmt.Errorf("receipts: sequence %s: content of %s: %w", ws, r.ID, err)
				}
				r.ContentHash, r.Metadata = q.contentHash, q.metadata
				arg.Contents[i], arg.Metadatas[i] = string(q.content), string(q.metadata)
			}
		}
		arg.ContentHashes[i] = r.ContentHash
		hash, err := ChainHash(r.ID.String(), seq, prev, r.ContentHash, r.Metadata)
		if err != nil {
			return 0, err
		}
		arg.Ids[i], arg.Seqs[i], arg.PrevHashes[i], arg.Hashes[i] = r.ID, seq, prev, hash
		prev = hash
	}
	n, err := q.ChainReceipts(ctx, arg)
	if err != nil {
		return 0, fmt.Errorf("receipts: sequence %s: chain: %w", ws, err)
	}
	if n != int64(len(rows)) {
		return 0, fmt.Errorf("receipts: sequence %s: chained %d of %d receipts", ws, n, len(rows))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("receipts: sequence %s: commit: %w", ws, err)
	}
	return len(rows), nil
}

// ContentErrorKey is the metadata member that marks a receipt whose
// content could not be canonicalised when it was chained; its value says
// why. Being metadata, it is hashed into the chain.
const ContentErrorKey = "content_error"

// quarantined is a receipt's content made hashable.
type quarantined struct {
	content, metadata, contentHash []byte
}

// quarantine turns content that RFC 8785 cannot canonicalise (nested
// deeper than canonjson allows, say) into content that it can, losing
// nothing: {"content_error": why, "content_text": the stored JSON as a
// string}. The metadata gains content_error too, so verifiers count such
// receipts and the chain proves which they are.
func quarantine(content, metadata []byte, cause error) (quarantined, error) {
	why := cause.Error()
	b, err := json.Marshal(map[string]string{ContentErrorKey: why, "content_text": string(content)})
	if err != nil {
		return quarantined{}, fmt.Errorf("encode quarantined content: %w", err)
	}
	meta := map[string]json.RawMessage{}
	if err := json.Unmarshal(metadata, &meta); err != nil {
		return quarantined{}, fmt.Errorf("metadata is not a JSON object: %w", err)
	}
	meta[ContentErrorKey], _ = json.Marshal(why)
	m, err := json.Marshal(meta)
	if err != nil {
		return quarantined{}, fmt.Errorf("encode metadata: %w", err)
	}
	hash, err := ContentHash(json.RawMessage(b))
	if err != nil {
		return quarantined{}, err
	}
	return quarantined{content: b, metadata: m, contentHash: hash}, nil
}
