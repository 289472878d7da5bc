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
		ContentHashes: make([][]byte, len(rows))}
	for i, r := range rows {
		seq := head + int64(i) + 1
		if r.ContentHash == nil {
			// Written on the automatic path: the content hash is computed
			// here, in the batch, from the content as stored.
			if r.ContentHash, err = ContentHash(json.RawMessage(r.Content)); err != nil {
				return 0, fmt.Errorf("receipts: sequence %s: content hash of %s: %w", ws, r.ID, err)
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
