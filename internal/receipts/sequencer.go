package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

// BatchSize is the most receipts of one workspace one sequencer turn
// chains.
const BatchSize = 1000

// Feed is the sequencer as a roll-up feed (internal/rollup): receipts'
// positions (receipts.pos, drawn as each is inserted) are its ids, and its
// fold chains the receipts up to a position once every transaction that
// was writing receipts when that position was read has ended, so a
// receipt that commits late is never skipped. One sequencer runs at a
// time across all instances (it holds the feed for the turn).
func Feed(now time.Time, chained *int) rollup.Feed {
	return rollup.Feed{
		Name: "receipts",
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.ReceiptsHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, _, upto int64) (int64, error) {
			n, to, err := chainUpTo(ctx, q, upto, now)
			*chained += n
			return to, err
		},
	}
}

// Sequence chains the receipts that wait for it, in every workspace, and
// returns how many it chained: turns of the feed until nothing is left
// that is safe to chain (or another sequencer holds the feed). Each
// workspace's receipts get seq head+1… in position order, with prev_hash
// and hash; seq stays gapless (a turn commits whole or not at all). Calls
// never wait for it: receipts are written unchained with their outcomes.
func Sequence(ctx context.Context, pool *pgxpool.Pool, now time.Time) (int, error) {
	total := 0
	f := Feed(now, &total)
	for range maxTurns {
		p, err := rollup.Advance(ctx, pool, f)
		if err != nil {
			return total, fmt.Errorf("receipts: sequence: %w", err)
		}
		if !p.More || p.Busy || ctx.Err() != nil {
			break
		}
	}
	return total, nil
}

// maxTurns bounds one Sequence: a backlog of a million receipts in one
// workspace is a thousand turns; the server calls again at once when a
// turn chained something.
const maxTurns = 64

// chainUpTo chains every workspace's receipts with positions through upto
// (at most BatchSize per workspace) in q's transaction, and returns how
// many it chained and the position up to which every receipt is chained
// now: upto, or less when a workspace had more than a batch.
func chainUpTo(ctx context.Context, q *db.Queries, upto int64, now time.Time) (int, int64, error) {
	heads, err := q.ListChainHeadsWithWork(ctx, upto)
	if err != nil {
		return 0, 0, fmt.Errorf("heads: %w", err)
	}
	total, to := 0, upto
	for _, h := range heads {
		n, last, err := chainBatch(ctx, q, h, upto, now)
		total += n
		if err != nil {
			return total, 0, err
		}
		if n == BatchSize && last < to {
			// More of this workspace waits: the feed stops at the last
			// position chained (every workspace is chained that far).
			to = last
		}
	}
	return total, to, nil
}

// chainBatch chains up to BatchSize of a workspace's receipts after its
// head through upto, and returns how many and the last one's position.
func chainBatch(ctx context.Context, q *db.Queries, h db.ListChainHeadsWithWorkRow, upto int64, now time.Time) (int, int64, error) {
	ws, head, prev := h.WorkspaceID, h.Seq, h.Hash
	if head == 0 {
		prev = GenesisHash
	}
	rows, err := q.ListReceiptsToChain(ctx, db.ListReceiptsToChainParams{WorkspaceID: ws, AfterPos: h.ReceiptPos, Upto: upto, Lim: BatchSize})
	if err != nil {
		return 0, 0, fmt.Errorf("workspace %s: select: %w", ws, err)
	}
	if len(rows) == 0 {
		return 0, 0, nil
	}
	arg := db.ChainReceiptsParams{WorkspaceID: ws, ChainedAt: now,
		Ids: make([]uuid.UUID, len(rows)), Seqs: make([]int64, len(rows)), Positions: make([]int64, len(rows)),
		PrevHashes: make([][]byte, len(rows)), Hashes: make([][]byte, len(rows)), ContentHashes: make([][]byte, len(rows))}
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
				qr, err := quarantine(r.Content, r.Metadata, cerr)
				if err != nil {
					return 0, 0, fmt.Errorf("workspace %s: content of %s: %w", ws, r.ID, err)
				}
				if _, err := q.QuarantineReceipt(ctx, db.QuarantineReceiptParams{ID: r.ID, WorkspaceID: ws,
					Content: qr.content, Metadata: qr.metadata, ContentHash: qr.contentHash}); err != nil {
					return 0, 0, fmt.Errorf("workspace %s: quarantine %s: %w", ws, r.ID, err)
				}
				r.ContentHash, r.Metadata = qr.contentHash, qr.metadata
			}
		}
		hash, err := ChainHash(r.ID.String(), seq, prev, r.ContentHash, r.Metadata)
		if err != nil {
			return 0, 0, err
		}
		arg.Ids[i], arg.Seqs[i], arg.Positions[i], arg.PrevHashes[i], arg.Hashes[i], arg.ContentHashes[i] = r.ID, seq, r.Pos, prev, hash, r.ContentHash
		prev = hash
	}
	n, err := q.ChainReceipts(ctx, arg)
	if err != nil {
		return 0, 0, fmt.Errorf("workspace %s: chain: %w", ws, err)
	}
	if n != int64(len(rows)) {
		return 0, 0, fmt.Errorf("workspace %s: chained %d of %d receipts", ws, n, len(rows))
	}
	return len(rows), rows[len(rows)-1].Pos, nil
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
