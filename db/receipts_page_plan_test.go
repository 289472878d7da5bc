package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// TestReceiptsPage_ReadsTheLatestThroughItsIndexes: /admin/receipts' latest
// receipts (unchained first, then the chain from its head down) read each
// index up to the limit, not the workspace's whole chain: with
// 20,000 chained receipts of a call's size (about 1.5 KB each, as at
// volume: narrow rows make a sequential scan look dearer than it is) and
// three waiting, no sequential scan and no sort of every receipt, and the
// page is the right 50 in the right order.
func TestReceiptsPage_ReadsTheLatestThroughItsIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.MustPool(t)
	var ws uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO workspaces (slug, name) VALUES ('receipts-page', 'r') RETURNING id`).Scan(&ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		WITH r AS (
			INSERT INTO receipts (workspace_id, kind, content, content_hash, metadata, created_at)
			SELECT $1, 'execution', jsonb_build_object('arguments', repeat(md5(i::text), 45)), sha256(i::text::bytea), '{}', now() - (20001 - i) * interval '1 second'
			FROM generate_series(1, 20000) i
			RETURNING id, pos, content_hash
		)
		INSERT INTO receipt_links (workspace_id, seq, receipt_id, receipt_pos, prev_hash, hash, content_hash)
		SELECT $1, row_number() OVER (ORDER BY pos), id, pos, content_hash, content_hash, content_hash FROM r`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO receipts (workspace_id, kind, content, metadata, created_at)
		SELECT $1, 'execution', '{}', '{}', now() + i * interval '1 second' FROM generate_series(1, 3) i`, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE receipts, receipt_links`); err != nil {
		t.Fatal(err)
	}
	text := explain(t, ctx, pool, db.ListRecentReceiptsSQL, ws, 50)
	for _, want := range []string{"receipts_position_idx", "receipt_links_pkey"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not read %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Seq Scan on receipt") {
		t.Errorf("the page scans every receipt:\n%s", text)
	}
	// The pending count reads the range after the head's position, not
	// every receipt (the generic plan guesses a third of the table).
	head, err := db.New(pool).GetReceiptChainHead(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if count := explain(t, ctx, pool, db.CountUnchainedReceiptsSQL, ws, head.ReceiptPos); !strings.Contains(count, "receipts_position_idx") || strings.Contains(count, "Seq Scan") {
		t.Errorf("the pending count does not read receipts_position_idx alone:\n%s", count)
	}
	if p, err := db.New(pool).CountUnchainedReceipts(ctx, db.CountUnchainedReceiptsParams{WorkspaceID: ws, AfterPos: head.ReceiptPos}); err != nil || p.Pending != 3 {
		t.Fatalf("pending %d (%v), want 3", p.Pending, err)
	}
	rows, err := db.New(pool).ListRecentReceipts(ctx, db.ListRecentReceiptsParams{WorkspaceID: ws, Lim: 50})
	if err != nil || len(rows) != 50 {
		t.Fatalf("%d rows (%v), want 50", len(rows), err)
	}
	for i, r := range rows[:3] {
		if r.Seq.Valid {
			t.Fatalf("row %d is chained; the 3 unchained come first", i)
		}
	}
	if !rows[0].CreatedAt.After(rows[2].CreatedAt) {
		t.Errorf("unchained receipts are not newest first")
	}
	for i, r := range rows[3:] {
		if want := int64(20000 - i); r.Seq.Int64 != want {
			t.Fatalf("chained row %d has seq %d, want %d (from the head down)", i, r.Seq.Int64, want)
		}
	}
}
