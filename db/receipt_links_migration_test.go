package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Migration 33 moves each chained receipt's place in its chain into
// receipt_links, and back: chains written before it (some receipts still
// waiting, one of them without its content hash as the automatic path
// writes them) verify after it, the sequencer goes on from their heads,
// and after the down migration the receipts table holds every receipt's
// place again, still verifying, ready to go up once more.
func TestReceiptLinksMigration_ChainsVerifyUpDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, pool := atVersion(t, ctx, 32)

	// Two workspaces' chains as the old sequencer left them: 12 and 5
	// receipts chained, 3 and 2 waiting (the last without a content hash).
	want := map[uuid.UUID]int{}
	for i, n := range []struct{ chained, waiting int }{{12, 3}, {5, 2}} {
		var ws uuid.UUID
		if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id`, fmt.Sprintf("links-%d", i)).Scan(&ws); err != nil {
			t.Fatal(err)
		}
		writeOldChain(t, ctx, pool, ws, n.chained, n.waiting)
		want[ws] = n.chained + n.waiting
	}

	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	svc := receipts.NewService(pool)
	for ws, n := range want {
		if res, err := svc.VerifyWorkspace(ctx, ws, nil); err != nil || !res.OK || res.Pending == 0 {
			t.Fatalf("after up, before chaining: %+v %v", res, err)
		}
		_ = n
	}
	if _, err := receipts.Sequence(ctx, pool, time.Now()); err != nil {
		t.Fatal(err)
	}
	for ws, n := range want {
		if res, err := svc.VerifyWorkspace(ctx, ws, nil); err != nil || !res.OK || res.HeadSeq != int64(n) || res.Pending != 0 {
			t.Fatalf("after up and chaining: %+v %v; want %d chained", res, err, n)
		}
	}

	if err := m.To(32); err != nil {
		t.Fatal(err)
	}
	for ws, n := range want {
		if got := verifyOldChain(t, ctx, pool, ws); got != n {
			t.Fatalf("after down: %d receipts verify in the old columns; want %d", got, n)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatal(err)
	}
	for ws, n := range want {
		if res, err := svc.VerifyWorkspace(ctx, ws, nil); err != nil || !res.OK || res.HeadSeq != int64(n) || res.Pending != 0 {
			t.Fatalf("up again: %+v %v; want %d chained", res, err, n)
		}
	}
	// New receipts chain after the migrated heads.
	for ws, n := range want {
		if _, err := receipts.Record(ctx, db.New(pool), ws, receipts.Content{Kind: receipts.KindExecution, Outcome: "auto"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := receipts.Sequence(ctx, pool, time.Now()); err != nil {
			t.Fatal(err)
		}
		if res, err := svc.VerifyWorkspace(ctx, ws, nil); err != nil || !res.OK || res.HeadSeq != int64(n+1) {
			t.Fatalf("a new receipt: %+v %v; want head %d", res, err, n+1)
		}
	}
}

// writeOldChain writes receipts as the schema before migration 33 held
// them: chained ones with seq, prev_hash and hash on their rows.
func writeOldChain(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID, chained, waiting int) {
	t.Helper()
	prev := receipts.GenesisHash
	for i := 1; i <= chained+waiting; i++ {
		id := uuid.Must(uuid.NewV7())
		content := json.RawMessage(fmt.Sprintf(`{"kind":"execution","outcome":"auto","n":%d}`, i))
		meta := json.RawMessage(fmt.Sprintf(`{"kind":"execution","workspace_id":%q}`, ws))
		sum, err := receipts.ContentHash(content)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i <= chained:
			hash, err := receipts.ChainHash(id.String(), int64(i), prev, sum, meta)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `INSERT INTO receipts (id, workspace_id, kind, content, content_hash, metadata, seq, prev_hash, hash, chained_at)
				VALUES ($1, $2, 'execution', $3, $4, $5, $6, $7, $8, now())`, id, ws, content, sum, meta, i, prev, hash); err != nil {
				t.Fatal(err)
			}
			prev = hash
		case i == chained+waiting:
			// The automatic path's: its content hash is the sequencer's.
			if _, err := pool.Exec(ctx, `INSERT INTO receipts (id, workspace_id, kind, content, metadata) VALUES ($1, $2, 'execution', $3, $4)`,
				id, ws, content, meta); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := pool.Exec(ctx, `INSERT INTO receipts (id, workspace_id, kind, content, content_hash, metadata) VALUES ($1, $2, 'execution', $3, $4, $5)`,
				id, ws, content, sum, meta); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// verifyOldChain verifies a workspace's chain from the columns the schema
// before migration 33 kept on the receipts, and returns its length.
func verifyOldChain(t *testing.T, ctx context.Context, pool *pgxpool.Pool, ws uuid.UUID) int {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id::text, seq, prev_hash, hash, content_hash, metadata, content FROM receipts WHERE workspace_id = $1 ORDER BY seq`, ws)
	if err != nil {
		t.Fatal(err)
	}
	var chain []receipts.Row
	for rows.Next() {
		var r receipts.Row
		var meta, content []byte
		if err := rows.Scan(&r.ReceiptID, &r.Seq, &r.PrevHash, &r.Hash, &r.ContentHash, &meta, &content); err != nil {
			t.Fatal(err)
		}
		r.Metadata, r.Content = meta, content
		chain = append(chain, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	res := receipts.Verify(func(yield func(receipts.Row) bool) {
		for _, r := range chain {
			if !yield(r) {
				return
			}
		}
	})
	if !res.OK {
		t.Fatalf("the old columns do not verify: %+v", res)
	}
	return int(res.Checked)
}
