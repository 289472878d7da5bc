package receipts_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// nested is a JSON object nested depth deep: {"a":{"a":…{}…}}.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// TestSequence_AContentItCannotHashIsChainedAsTextAndTheChainMovesOn is
// old data: a receipt stored before every path checked its JSON, whose
// content RFC 8785 canonicalisation refuses. It is chained, kept as text
// and marked in its metadata; the receipts after it are chained too; the
// chain verifies and says how many such receipts it holds.
func TestSequence_AContentItCannotHashIsChainedAsTextAndTheChainMovesOn(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 2)
	// As an old server stored it: content unhashed, deeper than canonjson takes.
	deep := `{"kind":"execution","arguments":` + nested(1500) + `}`
	var bad string
	if err := pool.QueryRow(t.Context(), `INSERT INTO receipts (workspace_id, kind, content, metadata, created_at)
		VALUES ($1::uuid, 'execution', $2::jsonb, jsonb_build_object('kind', 'execution', 'workspace_id', $3::text), now())
		RETURNING id::text`, ws, deep, ws.String()).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	record(t, pool, ws, 3)

	n, err := receipts.Sequence(t.Context(), pool, time.Now())
	if err != nil || n != 6 {
		t.Fatalf("Sequence = %d, %v; want all 6 chained", n, err)
	}
	var pending int
	pool.QueryRow(t.Context(), `SELECT count(*) FROM receipt_rows WHERE seq IS NULL`).Scan(&pending)
	if pending != 0 {
		t.Fatalf("%d receipts are still unchained", pending)
	}
	var seq int64
	var content, meta []byte
	if err := pool.QueryRow(t.Context(), `SELECT seq, content, metadata FROM receipt_rows WHERE id = $1`, bad).Scan(&seq, &content, &meta); err != nil {
		t.Fatal(err)
	}
	var kept map[string]string
	if err := json.Unmarshal(content, &kept); err != nil || !strings.Contains(kept["content_error"], "nested deeper than") {
		t.Fatalf("the quarantined content: %v %.200s", err, content)
	}
	var original any
	if err := json.Unmarshal([]byte(kept["content_text"]), &original); err != nil {
		t.Fatalf("content_text is not the stored JSON: %v", err)
	}
	if !strings.Contains(string(meta), `"content_error"`) {
		t.Fatalf("metadata does not say so: %s", meta)
	}
	res := verify(t, pool, ws, nil)
	if !res.OK || res.HeadSeq != 6 || res.ContentErrors != 1 || res.FirstContentErrorSeq != seq || res.Pending != 0 {
		t.Fatalf("verify: %+v; want ok over 6 with one content error at seq %d", res, seq)
	}
	// The mark is part of the chain: removing it is tampering.
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET metadata = metadata - 'content_error' WHERE id = $1`, bad); err != nil {
		t.Fatal(err)
	}
	if res := verify(t, pool, ws, nil); res.OK || res.FirstBadSeq != seq {
		t.Fatalf("after removing the mark: %+v", res)
	}
}

// TestVerify_AReceiptWaitingPastTheBoundFails: a chain whose chained prefix
// verifies is not ok while a receipt has waited longer than the bound to
// be chained (a stalled sequencer), and is again once it is chained.
func TestVerify_AReceiptWaitingPastTheBoundFails(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 3)
	sequenceAll(t, pool)
	record(t, pool, ws, 2)
	svc := receipts.NewService(pool)
	res, err := svc.VerifyWorkspace(t.Context(), ws, nil)
	if err != nil || !res.OK || res.Pending != 2 || res.OldestPendingAt == nil {
		t.Fatalf("fresh pending receipts: %+v %v; want ok with 2 pending", res, err)
	}
	later := func() time.Time { return time.Now().Add(receipts.DefaultStallBound + time.Minute) }
	res, err = svc.WithStallBound(receipts.DefaultStallBound, later).VerifyWorkspace(t.Context(), ws, nil)
	if err != nil || res.OK || res.FirstBadSeq != 4 || res.Checked != 3 || !strings.Contains(res.Reason, "2 receipts wait to be chained") {
		t.Fatalf("receipts waiting past the bound: %+v %v; want not ok at seq 4", res, err)
	}
	sequenceAll(t, pool)
	if res, err := svc.WithStallBound(receipts.DefaultStallBound, later).VerifyWorkspace(t.Context(), ws, nil); err != nil || !res.OK || res.Pending != 0 || res.HeadSeq != 5 {
		t.Fatalf("once chained: %+v %v", res, err)
	}
}

// TestRecord_RefusesContentTheSequencerCouldNotHash: no path can store a
// receipt the sequencer would fail on. Arguments stored before the strict
// checks come back as a field error, and nothing is written.
func TestRecord_RefusesContentTheSequencerCouldNotHash(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	for name, args := range map[string]string{
		"nested deeper than receipts hold": nested(70),
		"a duplicate key":                  `{"a":1,"a":2}`,
		"a NUL":                            `{"a":"x\u0000"}`,
		"a lone surrogate":                 `{"a":"\ud800"}`,
		"a number no double holds":         `{"a":1e400}`,
	} {
		c := typicalContent(0)
		c.Arguments = json.RawMessage(args)
		_, err := receipts.Record(t.Context(), db.New(pool), ws, c, time.Now())
		if apperr.Code(err) != apperr.EINVALID {
			t.Errorf("%s: Record = %v, want a field error", name, err)
		}
	}
	// What strict callers let through is always recorded, numbers that
	// PostgreSQL gives back long included.
	c := typicalContent(0)
	c.Arguments = json.RawMessage(`{"big":1` + strings.Repeat("0", 300) + `,"deep":` + nested(32) + `}`)
	if _, err := receipts.Record(t.Context(), db.New(pool), ws, c, time.Now()); err != nil {
		t.Fatalf("a receipt of strictly checked arguments: %v", err)
	}
	assertReceipts(t, pool, 1)
}

func assertReceipts(t *testing.T, pool *pgxpool.Pool, want int) {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM receipts`).Scan(&n); err != nil || n != want {
		t.Fatalf("%d receipts stored (%v), want %d", n, err, want)
	}
}
