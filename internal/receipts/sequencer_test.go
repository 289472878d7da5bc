package receipts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// mustPool is a pool on a fresh database with room for concurrent writers.
func mustPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, dbtest.MustURL(t))
}

func poolOn(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func mustWorkspace(t *testing.T, pool *pgxpool.Pool, slug string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := pool.QueryRow(t.Context(), "INSERT INTO workspaces (slug, name) VALUES ($1, $1) RETURNING id", slug).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// typicalContent is a receipt's content as an execution records it.
func typicalContent(i int) receipts.Content {
	return receipts.Content{
		Kind: receipts.KindExecution, Outcome: "approval", ProposalID: uuid.NewString(),
		Actor:       receipts.Actor{Kind: "user", UserID: uuid.NewString(), TokenID: uuid.NewString(), Role: "approver"},
		ActionClass: "email.send.external", Tool: "email.send",
		DecisionAtPropose: json.RawMessage(`{"state":"deferred","disposition":"confirm","layers":[{"layer":"effect","state":"review_required","reason":"sends mail outside the workspace"},{"layer":"rate","state":"allow","reason":"3 of 20 this hour"}]}`),
		DecisionAtEffect:  json.RawMessage(`{"state":"allow","disposition":"auto","layers":[{"layer":"approval","state":"allow","reason":"approved by a second approver"}]}`),
		Arguments:         json.RawMessage(fmt.Sprintf(`{"to":["ana@example.com","bo@example.org"],"subject":"Invoice %d","body":"Hello,\nplease find the invoice attached. Amount: 1234.50 EUR, due in 30 days.\n— Gatehouse ✓","priority":1e-7,"big":1e21}`, i)),
		ToolsHash:         "3f1c0a9e4b5d6c7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e",
		Rationale:         "The customer asked for the invoice in yesterday's thread.",
	}
}

// record writes n receipts in the workspace, each in its own transaction.
func record(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range n {
		id, err := receipts.Record(t.Context(), db.New(pool), ws, typicalContent(i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func sequenceAll(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func verify(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID, cp *receipts.Checkpoint) receipts.Result {
	t.Helper()
	res, err := receipts.NewService(pool).VerifyWorkspace(t.Context(), ws, cp)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSequence_ConcurrentReceiptsAndTwoSequencersGiveAGaplessChain(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	pool := poolOn(t, url)
	ws := mustWorkspace(t, pool, "w")
	other := mustWorkspace(t, pool, "other")
	const n = 500
	ctx, stop := context.WithCancel(t.Context())
	var sequencers sync.WaitGroup
	chained, rounds := make([]int, 2), make([]int, 2)
	for i := range 2 {
		// Each sequencer on a pool of its own, as on two instances.
		own := poolOn(t, url)
		sequencers.Go(func() {
			for ctx.Err() == nil {
				k, err := receipts.Sequence(ctx, own, time.Now())
				if err != nil && ctx.Err() == nil {
					t.Errorf("sequencer %d: %v", i, err)
					return
				}
				chained[i] += k
				if k > 0 {
					rounds[i]++
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	var writers sync.WaitGroup
	ids := make(chan uuid.UUID, n)
	for i := range n {
		writers.Go(func() {
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			defer tx.Rollback(t.Context())
			target := ws
			if i%10 == 0 {
				target = other
			}
			id, err := receipts.Record(t.Context(), db.New(tx), target, typicalContent(i), time.Now())
			if err != nil {
				t.Error(err)
				return
			}
			if err := tx.Commit(t.Context()); err != nil {
				t.Error(err)
				return
			}
			ids <- id
		})
	}
	writers.Wait()
	close(ids)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pending int
		if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM receipt_rows WHERE seq IS NULL").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receipts still unchained", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	sequencers.Wait()
	t.Logf("the sequencers chained %d and %d receipts, in %d and %d rounds", chained[0], chained[1], rounds[0], rounds[1])
	if chained[0]+chained[1] != n {
		t.Errorf("the sequencers chained %d + %d receipts, want %d in all", chained[0], chained[1], n)
	}
	for _, w := range []struct {
		id   uuid.UUID
		want int
	}{{ws, n - n/10}, {other, n / 10}} {
		var count, distinct, minSeq, maxSeq int
		if err := pool.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT seq), min(seq), max(seq) FROM receipt_rows WHERE workspace_id = $1", w.id).
			Scan(&count, &distinct, &minSeq, &maxSeq); err != nil {
			t.Fatal(err)
		}
		if count != w.want || distinct != w.want || minSeq != 1 || maxSeq != w.want {
			t.Errorf("workspace %s: %d receipts, %d distinct seqs from %d to %d; want 1..%d", w.id, count, distinct, minSeq, maxSeq, w.want)
		}
		if res := verify(t, pool, w.id, nil); !res.OK || res.Checked != int64(w.want) || res.HeadSeq != int64(w.want) {
			t.Errorf("workspace %s: %+v", w.id, res)
		}
	}
	for id := range ids {
		var seq *int64
		if err := pool.QueryRow(t.Context(), "SELECT seq FROM receipt_rows WHERE id = $1", id).Scan(&seq); err != nil || seq == nil {
			t.Fatalf("receipt %s: seq %v, %v", id, seq, err)
		}
	}
}

func TestSequence_WaitsItsTurnWhileAnotherSequencerHoldsTheFeed(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 3)
	// Hold the feed as another instance's sequencer would.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if hold, err := db.New(tx).TryHoldRollupFeed(t.Context(), db.TryHoldRollupFeedParams{Feed: "receipts"}); err != nil || !hold.Held {
		t.Fatalf("holding the feed: %v, %v", hold.Held, err)
	}
	start := time.Now()
	if n, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil || n != 0 {
		t.Fatalf("with the feed held elsewhere: chained %d, %v", n, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the sequencer waited for the feed")
	}
	tx.Rollback(t.Context())
	if n, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil || n != 3 {
		t.Fatalf("after the feed was released: chained %d, %v", n, err)
	}
}

// A receipt whose transaction commits after a later one's is not skipped:
// the sequencer waits for it, then chains both in position order.
func TestSequence_AReceiptCommittedLateIsChainedInItsPlace(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	late, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(t.Context())
	first, err := receipts.Record(t.Context(), db.New(late), ws, typicalContent(1), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	second := record(t, pool, ws, 1)[0]
	if n, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil || n != 0 {
		t.Fatalf("while an earlier receipt's transaction is open: chained %d, %v; want none", n, err)
	}
	if err := late.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil || n != 2 {
		t.Fatalf("after it committed: chained %d, %v; want both", n, err)
	}
	for want, id := range []uuid.UUID{first, second} {
		var seq int64
		if err := pool.QueryRow(t.Context(), "SELECT seq FROM receipt_rows WHERE id = $1", id).Scan(&seq); err != nil || seq != int64(want+1) {
			t.Fatalf("receipt %d: seq %d, %v; want %d", want+1, seq, err, want+1)
		}
	}
	if res := verify(t, pool, ws, nil); !res.OK || res.HeadSeq != 2 {
		t.Fatalf("%+v", res)
	}
}

func TestSequence_ChainsInBatches(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	// More than one batch, written in one statement for speed.
	n := receipts.BatchSize + 7
	c, _ := receipts.Canonical(map[string]any{"kind": "execution"})
	sum, _ := receipts.ContentHash(map[string]any{"kind": "execution"})
	if _, err := pool.Exec(t.Context(), `INSERT INTO receipts (workspace_id, kind, content, content_hash, metadata)
		SELECT $1, 'execution', $2, $3, jsonb_build_object('kind', 'execution', 'n', i) FROM generate_series(1, $4) AS i`, ws, c, sum, n); err != nil {
		t.Fatal(err)
	}
	if got, err := receipts.Sequence(t.Context(), pool, time.Now()); err != nil || got != n {
		t.Fatalf("chained %d, %v; want %d", got, err, n)
	}
	if res := verify(t, pool, ws, nil); !res.OK || res.HeadSeq != int64(n) {
		t.Fatalf("%+v", res)
	}
}

// TestVerify_TamperingInSQLIsFoundAtTheFirstBadSeq changes a chain as
// someone with database access could, and expects verification to name
// the first receipt each change affects.
func TestVerify_TamperingInSQLIsFoundAtTheFirstBadSeq(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		sql     string
		badSeq  int64
		because string
	}{
		{"a content field changed", `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"a different rationale"') WHERE id = (SELECT receipt_id FROM receipt_links WHERE seq = 4)`, 4, "does not match its content_hash"},
		{"a content number changed", `UPDATE receipts SET content = jsonb_set(content, '{arguments,priority}', '2') WHERE id = (SELECT receipt_id FROM receipt_links WHERE seq = 7)`, 7, "does not match its content_hash"},
		{"two rows' seq swapped", `UPDATE receipt_links SET seq = 1000 WHERE seq = 3; UPDATE receipt_links SET seq = 3 WHERE seq = 6; UPDATE receipt_links SET seq = 6 WHERE seq = 1000`, 3, "prev_hash"},
		{"a row deleted", `WITH l AS (DELETE FROM receipt_links WHERE seq = 5 RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, 5, "seq 5 is missing"},
		// Seqs 4 to 6 are the second of the pages of three read below.
		{"a page of rows deleted", `WITH l AS (DELETE FROM receipt_links WHERE seq BETWEEN 4 AND 6 RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, 4, "seq 4 is missing"},
		// Deleting the head leaves a shorter chain that verifies: a checkpoint
		// saved before is what catches it (see the checkpoint test).
		{"the head deleted needs a checkpoint to be seen", `WITH l AS (DELETE FROM receipt_links WHERE seq = 10 RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, 0, ""},
		{"a row inserted", `UPDATE receipt_links SET seq = seq + 100 WHERE seq >= 6;
			WITH r AS (INSERT INTO receipts (workspace_id, kind, content, content_hash, metadata)
			           SELECT workspace_id, kind, content, content_hash, metadata FROM receipt_rows WHERE seq = 5 RETURNING id, pos)
			INSERT INTO receipt_links (workspace_id, seq, receipt_id, receipt_pos, prev_hash, hash, content_hash)
			SELECT l.workspace_id, 6, r.id, r.pos, l.hash, sha256(l.hash), l.content_hash FROM receipt_links l, r WHERE l.seq = 5;
			UPDATE receipt_links SET seq = seq - 99 WHERE seq > 100`, 6, "the hash of receipt"},
		{"a hash changed", `UPDATE receipt_links SET hash = sha256(hash) WHERE seq = 8`, 8, "the hash of receipt"},
		{"a content_hash changed with its content", `UPDATE receipts SET content = content || '{"reason":"x"}' WHERE id = (SELECT receipt_id FROM receipt_links WHERE seq = 2);
			UPDATE receipt_links l SET content_hash = sha256(convert_to(r.content::text, 'UTF8')) FROM receipts r WHERE r.id = l.receipt_id AND l.seq = 2`, 2, "content_hash"},
		{"metadata changed", `UPDATE receipts SET metadata = metadata || '{"kind":"refusal"}' WHERE id = (SELECT receipt_id FROM receipt_links WHERE seq = 9)`, 9, "the hash of receipt"},
		{"seq 1 prev_hash changed", `UPDATE receipt_links SET prev_hash = sha256(prev_hash) WHERE seq = 1`, 1, "not 32 zero bytes"},
		{"a redaction without its reason", `UPDATE receipts r SET content = NULL, content_hash = l.content_hash, redacted_at = now() FROM receipt_links l WHERE l.receipt_id = r.id AND l.seq = 3`, 3, "without a reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool := mustPool(t)
			ws := mustWorkspace(t, pool, "w")
			record(t, pool, ws, 10)
			sequenceAll(t, pool)
			if res := verify(t, pool, ws, nil); !res.OK || res.HeadSeq != 10 {
				t.Fatalf("before: %+v", res)
			}
			if _, err := pool.Exec(t.Context(), c.sql); err != nil {
				t.Fatal(err)
			}
			res := verify(t, pool, ws, nil)
			// Read a page of three at a time (pages read ahead of the
			// one checked), the verification finds the same.
			paged, err := receipts.NewService(pool).WithVerifyPage(3).VerifyWorkspace(t.Context(), ws, nil)
			if err != nil || paged.Reason != res.Reason || paged.FirstBadSeq != res.FirstBadSeq || paged.Checked != res.Checked || paged.HeadHash != res.HeadHash {
				t.Fatalf("in pages of three: %+v, %v; in one page: %+v", paged, err, res)
			}
			if c.badSeq == 0 {
				if !res.OK {
					t.Fatalf("want ok, got %+v", res)
				}
				return
			}
			wantBreak(t, res, c.badSeq, c.because)
		})
	}
}

func TestVerify_ARewrittenChainFailsAgainstAnEarlierCheckpoint(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 6)
	sequenceAll(t, pool)
	key, _, err := receipts.LoadOrCreateKey(t.TempDir() + "/k")
	if err != nil {
		t.Fatal(err)
	}
	signer := receipts.NewSigner(key)
	svc := receipts.NewService(pool).WithSigner(signer)
	admin := receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), Role: "admin"}
	cp, err := svc.Checkpoint(t.Context(), admin, time.Now())
	if err != nil || cp.Seq != 6 {
		t.Fatalf("checkpoint %+v, %v", cp, err)
	}
	if err := receipts.VerifyCheckpoint(signer.PublicKey(), cp); err != nil {
		t.Fatal(err)
	}
	// Later receipts extend it.
	record(t, pool, ws, 3)
	sequenceAll(t, pool)
	if res := verify(t, pool, ws, &cp.Checkpoint); !res.OK || res.HeadSeq != 9 {
		t.Fatalf("extended chain against the checkpoint: %+v", res)
	}

	// An attacker changes seq 2's content and recomputes every hash after it.
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"nothing to see"') WHERE id = (SELECT receipt_id FROM receipt_links WHERE workspace_id = $1 AND seq = 2)`, ws); err != nil {
		t.Fatal(err)
	}
	rewrite(t, pool, ws)
	if res := verify(t, pool, ws, nil); !res.OK {
		t.Fatalf("the rewritten chain should verify on its own (that is what checkpoints are for): %+v", res)
	}
	res := verify(t, pool, ws, &cp.Checkpoint)
	if res.OK || res.FirstBadSeq != 6 || !strings.Contains(res.Reason, "checkpoint") {
		t.Fatalf("rewritten chain against the checkpoint: %+v", res)
	}

	// Cutting the chain below the checkpoint is caught as well.
	if _, err := pool.Exec(t.Context(), `WITH l AS (DELETE FROM receipt_links WHERE workspace_id = $1 AND seq >= 5 RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, ws); err != nil {
		t.Fatal(err)
	}
	res = verify(t, pool, ws, &cp.Checkpoint)
	if res.OK || res.FirstBadSeq != 5 || !strings.Contains(res.Reason, "before the checkpoint") {
		t.Fatalf("truncated chain against the checkpoint: %+v", res)
	}
}

// rewrite recomputes every content_hash and hash of a workspace's chain,
// as an attacker with database access would after changing content.
func rewrite(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) {
	t.Helper()
	rows, err := db.New(pool).ListChainedReceipts(t.Context(), db.ListChainedReceiptsParams{WorkspaceID: ws, AfterSeq: 0, Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	prev := receipts.GenesisHash
	for _, r := range rows {
		sum, err := receipts.ContentHash(json.RawMessage(r.Content))
		if err != nil {
			t.Fatal(err)
		}
		hash, err := receipts.ChainHash(r.ID.String(), r.Seq.Int64, prev, sum, r.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(t.Context(), "UPDATE receipt_links SET content_hash = $2, prev_hash = $3, hash = $4 WHERE receipt_id = $1", r.ID, sum, prev, hash); err != nil {
			t.Fatal(err)
		}
		prev = hash
	}
}

func TestRedact_KeepsTheChainVerifyingAndIsReceipted(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	ids := record(t, pool, ws, 5)
	sequenceAll(t, pool)
	svc := receipts.NewService(pool)
	admin := receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), Role: "admin"}
	// The audit row names its user; make one.
	if err := pool.QueryRow(t.Context(), "INSERT INTO users (email, password_hash) VALUES ('a@example.com', 'x') RETURNING id").Scan(&admin.UserID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []receipts.Caller{
		{WorkspaceID: ws, UserID: admin.UserID, Role: "approver"},
		{WorkspaceID: ws, UserID: admin.UserID, Role: "admin", Agent: true, TokenID: uuid.New()},
		{WorkspaceID: uuid.New(), UserID: admin.UserID, Role: "member"},
	} {
		if _, err := svc.Redact(t.Context(), c, ids[2], "personal data", time.Now()); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("%+v redacted: %v", c, err)
		}
	}
	red, err := svc.Redact(t.Context(), admin, ids[2], "personal data of a customer", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if red.Receipt.Content != nil || red.Receipt.RedactedFor != "personal data of a customer" || red.Receipt.Seq != 3 {
		t.Fatalf("%+v", red.Receipt)
	}
	if _, err := svc.Redact(t.Context(), admin, ids[2], "again", time.Now()); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("second redaction: %v", err)
	}
	if _, err := svc.Redact(t.Context(), admin, red.RedactionReceipt, "hide the redaction", time.Now()); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("redacting a redaction receipt: %v", err)
	}
	if _, err := svc.Redact(t.Context(), admin, uuid.New(), "x", time.Now()); err != receipts.ErrNotFound {
		t.Fatalf("unknown receipt: %v", err)
	}
	sequenceAll(t, pool)
	if res := verify(t, pool, ws, nil); !res.OK || res.HeadSeq != 6 {
		t.Fatalf("after the redaction: %+v", res)
	}
	rr, err := svc.Get(t.Context(), admin, red.RedactionReceipt)
	if err != nil {
		t.Fatal(err)
	}
	var content receipts.Content
	if err := json.Unmarshal(rr.Content, &content); err != nil {
		t.Fatal(err)
	}
	if rr.Kind != receipts.KindRedaction || rr.Seq != 6 || content.Change["receipt_id"] != ids[2].String() || content.Change["redacted_for"] != "personal data of a customer" ||
		content.Actor.UserID != admin.UserID.String() {
		t.Fatalf("redaction receipt %+v %+v", rr, content)
	}
	var audited int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_events WHERE action = 'receipt.redacted' AND subject_id = $1", ids[2].String()).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("audit rows %d, %v", audited, err)
	}
	// Content put back that is not the original is still caught.
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = '{"kind":"execution"}', redacted_at = NULL, redacted_for = NULL WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	if res := verify(t, pool, ws, nil); res.OK || res.FirstBadSeq != 3 {
		t.Fatalf("forged content in place of a redaction: %+v", res)
	}
}

func TestService_WhoMayDoWhat(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 1)
	svc := receipts.NewService(pool)
	member := receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), Role: "member"}
	agent := receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), TokenID: uuid.New(), Role: "admin", Agent: true}
	if _, err := svc.StartVerification(t.Context(), agent, 0); err == nil {
		t.Error("an agent verified")
	}
	if _, err := svc.Export(t.Context(), member, 0, 10); err == nil {
		t.Error("a member exported")
	}
	if _, err := svc.Checkpoint(t.Context(), member, time.Now()); err != receipts.ErrNoSigningKey {
		t.Errorf("checkpoint without a key: %v", err)
	}
	approver := receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), Role: "approver"}
	if rows, err := svc.Export(t.Context(), approver, 0, 10); err != nil || len(rows) != 0 {
		t.Errorf("an approver exports the (still empty) chain: %v %v", rows, err)
	}
}

// A receipt's content hash is computed by the sequencer, so its content is
// redacted only once it is chained: before, the answer says to retry.
func TestRedact_WaitsForTheChain(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	ids := record(t, pool, ws, 1)
	svc := receipts.NewService(pool)
	admin := receipts.Caller{WorkspaceID: ws, Role: "admin"}
	if err := pool.QueryRow(t.Context(), "INSERT INTO users (email, password_hash) VALUES ('a@example.com', 'x') RETURNING id").Scan(&admin.UserID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Redact(t.Context(), admin, ids[0], "personal data", time.Now()); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("redact before the chain: %v", err)
	}
	sequenceAll(t, pool)
	if _, err := svc.Redact(t.Context(), admin, ids[0], "personal data", time.Now()); err != nil {
		t.Fatalf("redact once chained: %v", err)
	}
}
