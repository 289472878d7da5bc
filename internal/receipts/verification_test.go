package receipts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// TestChainHash_WrittenDirectlyIsTheCanonicalForm: the chain hash a
// verification computes for every receipt, written without encoding the
// link, is byte for byte the hash of the link's RFC 8785 form.
func TestChainHash_WrittenDirectlyIsTheCanonicalForm(t *testing.T) {
	t.Parallel()
	prev, content := sha256.Sum256([]byte("prev")), sha256.Sum256([]byte("content"))
	for name, c := range map[string]struct {
		id       string
		seq      int64
		metadata string
	}{
		"typical":                 {uuid.NewString(), 42, `{"workspace_id":"w","kind":"execution","proposal_id":"p","action_class":"email.send.external","time":"2026-11-22T06:41:27.123456Z"}`},
		"keys out of order":       {uuid.NewString(), 1, `{"z":1,"a":{"y":[1,2,{"b":1,"a":2}],"x":null},"é":true,"€":false,"😀":"x"}`},
		"spaces and escapes":      {uuid.NewString(), 7, "{ \"a\" : \"<\\u003e&\\u2028\\n\\u0001\\\"\" ,\n \"b\":\"\\ud83d\\ude00\"}"},
		"numbers":                 {uuid.NewString(), 9007199254740992, `{"a":1e21,"b":1e-7,"c":100000000000000000000,"d":4.50,"e":-0,"f":3.0}`},
		"a content error mark":    {uuid.NewString(), 3, `{"kind":"execution","content_error":"canonjson: offset 5: nested deeper than 1000"}`},
		"an id that needs escape": {"a\"b\\c\u00e9\u0001", 5, `{}`},
		"a seq past 2^53":         {uuid.NewString(), 1<<53 + 1, `{}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := receipts.ChainHash(c.id, c.seq, prev[:], content[:], json.RawMessage(c.metadata))
			if err != nil {
				t.Fatal(err)
			}
			want, err := receipts.ChainHashOf(c.id, c.seq, prev[:], content[:], []byte(c.metadata))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("ChainHash %x, canonical form %x", got, want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1,"a":2}`, `{"a":`} {
		if _, err := receipts.ChainHash(uuid.NewString(), 1, prev[:], content[:], json.RawMessage(bad)); err == nil {
			t.Errorf("metadata %q hashed", bad)
		}
	}
}

// TestVerifierAt_ChecksTheCheckpointsReceiptAndWhatFollows: started at a
// checkpoint, the verifier needs only that receipt and the later ones;
// the checkpoint's receipt is checked against its own hashes and the
// checkpoint's hash, not against a prev_hash it never saw.
func TestVerifierAt_ChecksTheCheckpointsReceiptAndWhatFollows(t *testing.T) {
	t.Parallel()
	rows := chainOf(t, 8)
	changed := func(i int, f func(*receipts.Row)) []receipts.Row {
		out := slices.Clone(rows)
		f(&out[i])
		return out
	}
	for _, c := range []struct {
		name     string
		seq      int64
		hash     []byte
		rows     []receipts.Row
		badSeq   int64
		because  string
		checked  int64
		fromSeq  int64
		headHash []byte
	}{
		{"the tail", 5, rows[4].Hash, rows[4:], 0, "", 4, 5, rows[7].Hash},
		{"the head alone", 8, rows[7].Hash, rows[7:], 0, "", 1, 8, rows[7].Hash},
		{"seq 1 is a full verification", 1, rows[0].Hash, rows, 0, "", 8, 0, rows[7].Hash},
		{"the empty chain's checkpoint is a full verification", 0, receipts.GenesisHash, rows, 0, "", 8, 0, rows[7].Hash},
		{"another hash at the checkpoint", 5, rows[3].Hash, rows[4:], 5, "checkpoint", 0, 5, nil},
		{"the checkpoint's content changed", 5, rows[4].Hash, changed(4, func(r *receipts.Row) { r.Content = json.RawMessage(`{"kind":"forged"}`) })[4:], 5, "content_hash", 0, 5, nil},
		{"the checkpoint's prev_hash changed", 5, rows[4].Hash, changed(4, func(r *receipts.Row) { r.PrevHash = rows[0].Hash })[4:], 5, "the hash of receipt", 0, 5, nil},
		{"a receipt after it changed", 5, rows[4].Hash, changed(6, func(r *receipts.Row) { r.Content = json.RawMessage(`{"kind":"forged"}`) })[4:], 7, "content_hash", 2, 5, rows[5].Hash},
		{"the checkpoint's receipt missing", 5, rows[4].Hash, rows[5:], 5, "seq 5 is missing", 0, 5, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := receipts.NewVerifierAt(c.seq, c.hash)
			for _, r := range c.rows {
				if !v.Add(r) {
					break
				}
			}
			res := v.Result()
			if (c.badSeq == 0) != res.OK || res.FirstBadSeq != c.badSeq || !strings.Contains(res.Reason, c.because) || res.Checked != c.checked || res.FromSeq != c.fromSeq {
				t.Fatalf("%+v; want first bad seq %d (%q), %d checked from %d", res, c.badSeq, c.because, c.checked, c.fromSeq)
			}
			if c.headHash != nil && res.HeadHash != hex.EncodeToString(c.headHash) {
				t.Fatalf("head hash %s, want %x", res.HeadHash, c.headHash)
			}
		})
	}
}

// TestVerifyWorkspace_FromACheckpointReadsOnlyWhatFollowsIt: a
// verification from a checkpoint reads the checkpoint's receipt and the
// receipts after it, nothing before. A change before the checkpoint is a
// full verification's to find (the checkpoint verification still says
// ok: proving that earlier history holds is not its job); a change at or
// after it, and a rewritten tail, both find.
func TestVerifyWorkspace_FromACheckpointReadsOnlyWhatFollowsIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		sql  string
		// The first bad seq each finds (0: ok).
		fromCheckpoint, full int64
	}{
		{"nothing changed", ``, 0, 0},
		{"a content changed before the checkpoint", `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"changed"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 3)`, 0, 3},
		{"receipts deleted before the checkpoint", `WITH l AS (DELETE FROM receipt_links WHERE seq IN (2, 4) RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, 0, 2},
		{"a content changed after the checkpoint", `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"changed"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 9)`, 9, 9},
		{"the checkpoint's receipt changed", `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"changed"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 6)`, 6, 6},
		{"a receipt deleted after the checkpoint", `WITH l AS (DELETE FROM receipt_links WHERE seq = 8 RETURNING receipt_id) DELETE FROM receipts WHERE id IN (SELECT receipt_id FROM l)`, 8, 8},
		{"the tail rewritten from before the checkpoint", `rewrite 2`, 6, 0},
		{"the tail rewritten from after the checkpoint", `rewrite 8`, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool := mustPool(t)
			ws := mustWorkspace(t, pool, "w")
			record(t, pool, ws, 6)
			sequenceAll(t, pool)
			cp := checkpointOf(t, pool, ws)
			record(t, pool, ws, 6)
			sequenceAll(t, pool)
			switch {
			case strings.HasPrefix(c.sql, "rewrite "):
				from, _ := strconv.Atoi(strings.TrimPrefix(c.sql, "rewrite "))
				if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"nothing to see"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = $1)`, from); err != nil {
					t.Fatal(err)
				}
				rewrite(t, pool, ws)
			case c.sql != "":
				if _, err := pool.Exec(t.Context(), c.sql); err != nil {
					t.Fatal(err)
				}
			}
			res := verify(t, pool, ws, &cp)
			if res.OK != (c.fromCheckpoint == 0) || res.FirstBadSeq != c.fromCheckpoint || res.FromSeq != 6 {
				t.Errorf("from the checkpoint: %+v; want first bad seq %d", res, c.fromCheckpoint)
			}
			if c.fromCheckpoint == 0 && (res.Checked != 7 || res.HeadSeq != 12) {
				t.Errorf("from the checkpoint: checked %d to seq %d; want the 7 receipts from seq 6 to 12", res.Checked, res.HeadSeq)
			}
			if res := verify(t, pool, ws, nil); res.OK != (c.full == 0) || res.FirstBadSeq != c.full {
				t.Errorf("full: %+v; want first bad seq %d", res, c.full)
			}
		})
	}
}

// checkpointOf is the workspace's head, signed now.
func checkpointOf(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) receipts.Checkpoint {
	t.Helper()
	key, _, err := receipts.LoadOrCreateKey(t.TempDir() + "/k")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := receipts.NewService(pool).WithSigner(receipts.NewSigner(key)).Checkpoint(t.Context(), receipts.Caller{WorkspaceID: ws, UserID: uuid.New(), Role: "member"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cp.Checkpoint
}

// mustUser is a user of the workspace, as the caller that starts runs.
func mustUser(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID, role string) receipts.Caller {
	t.Helper()
	c := receipts.Caller{WorkspaceID: ws, Role: role}
	if err := pool.QueryRow(t.Context(), "INSERT INTO users (email, password_hash) VALUES ($1, 'x') RETURNING id", uuid.NewString()+"@example.com").Scan(&c.UserID); err != nil {
		t.Fatal(err)
	}
	return c
}

// runAll runs the queued verifications as a server's worker does.
func runAll(t *testing.T, svc *receipts.Service) int {
	t.Helper()
	n, err := svc.RunVerifications(t.Context(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestVerification_RunsInTheBackgroundAndRecordsTheVerifiedHead(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 25)
	sequenceAll(t, pool)
	svc := receipts.NewService(pool).WithVerifyPage(10)
	member := mustUser(t, pool, ws, "member")
	if _, ok, err := svc.VerifiedHead(t.Context(), ws); ok || err != nil {
		t.Fatalf("a verified head before any run: %v %v", ok, err)
	}
	run, err := svc.StartVerification(t.Context(), member, 0)
	if err != nil || run.Status != receipts.VerificationQueued || run.TargetSeq != -1 || run.Result != nil {
		t.Fatalf("started: %+v %v", run, err)
	}
	// Receipts chained after the run starts are not its to verify.
	if n := runAll(t, svc); n != 1 {
		t.Fatalf("%d runs", n)
	}
	record(t, pool, ws, 2)
	sequenceAll(t, pool)
	run, err = svc.Verification(t.Context(), member, run.ID)
	if err != nil || run.Status != receipts.VerificationDone || run.FinishedAt == nil || run.Checked != 25 || run.TargetSeq != 25 {
		t.Fatalf("finished: %+v %v", run, err)
	}
	if r := run.Result; !r.OK || r.Checked != 25 || r.HeadSeq != 25 || r.Pending != 0 || r.WorkspaceID != ws.String() {
		t.Fatalf("result: %+v", r)
	}
	head, ok, err := svc.VerifiedHead(t.Context(), ws)
	if err != nil || !ok || head.Seq != 25 || head.RunID != run.ID || receipts.Hex(head.Hash) != run.Result.HeadHash {
		t.Fatalf("verified head %+v %v %v", head, ok, err)
	}
	// The next run verifies the chain as it is then.
	next, err := svc.StartVerification(t.Context(), member, 0)
	if err != nil || next.ID == run.ID {
		t.Fatalf("the next run: %+v %v", next, err)
	}
	runAll(t, svc)
	if head, _, _ := svc.VerifiedHead(t.Context(), ws); head.Seq != 27 || head.RunID != next.ID {
		t.Fatalf("verified head after the next run: %+v", head)
	}
}

func TestVerification_StartingWhileOneWaitsOrRunsJoinsIt(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	other := mustWorkspace(t, pool, "other")
	record(t, pool, ws, 3)
	sequenceAll(t, pool)
	svc := receipts.NewService(pool)
	a, b := mustUser(t, pool, ws, "member"), mustUser(t, pool, ws, "admin")
	first, err := svc.StartVerification(t.Context(), a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := svc.StartVerification(t.Context(), b, 0); err != nil || again.ID != first.ID {
		t.Fatalf("a second start while it waits: %+v %v; want run %s", again, err, first.ID)
	}
	// Running (as a worker on another instance would have it).
	if _, err := pool.Exec(t.Context(), `UPDATE receipt_verifications SET status = 'running', attempt = 1, started_at = now(), heartbeat_at = now(), target_seq = 3 WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	if again, err := svc.StartVerification(t.Context(), b, 0); err != nil || again.ID != first.ID || again.Status != receipts.VerificationRunning {
		t.Fatalf("a second start while it runs: %+v %v; want run %s", again, err, first.ID)
	}
	// A live worker's run is not taken over; another workspace's starts.
	theirs, err := svc.StartVerification(t.Context(), mustUser(t, pool, other, "member"), 0)
	if err != nil || theirs.ID == first.ID {
		t.Fatalf("another workspace's run: %+v %v", theirs, err)
	}
	if n := runAll(t, svc); n != 1 {
		t.Fatalf("%d runs; want only the other workspace's", n)
	}
	if run, _ := svc.Verification(t.Context(), a, first.ID); run.Status != receipts.VerificationRunning {
		t.Fatalf("the live worker's run: %+v", run)
	}
	// A run of another workspace is not found.
	if _, err := svc.Verification(t.Context(), a, theirs.ID); err != receipts.ErrVerificationNotFound {
		t.Fatalf("another workspace's run: %v", err)
	}
}

func TestVerification_ATamperedChainEndsNotOKAtTheFirstBadSeq(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 30)
	sequenceAll(t, pool)
	svc := receipts.NewService(pool).WithVerifyPage(10)
	member := mustUser(t, pool, ws, "member")
	good, _ := svc.StartVerification(t.Context(), member, 0)
	runAll(t, svc)
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"changed"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 17)`); err != nil {
		t.Fatal(err)
	}
	run, _ := svc.StartVerification(t.Context(), member, 0)
	runAll(t, svc)
	run, err := svc.Verification(t.Context(), member, run.ID)
	if err != nil || run.Status != receipts.VerificationDone {
		t.Fatalf("%+v %v", run, err)
	}
	if r := run.Result; r.OK || r.FirstBadSeq != 17 || r.Checked != 16 || r.HeadSeq != 16 || !strings.Contains(r.Reason, "content_hash") {
		t.Fatalf("result: %+v", r)
	}
	// The verified head is still the one the last good run found.
	if head, _, _ := svc.VerifiedHead(t.Context(), ws); head.RunID != good.ID || head.Seq != 30 {
		t.Fatalf("verified head: %+v", head)
	}
}

// TestVerification_ARunWhoseWorkerDiedIsResumedFromItsProgress: a run
// left running by an instance that died (its heartbeat stale) is claimed
// by another worker, which goes on after the verified prefix it saved.
func TestVerification_ARunWhoseWorkerDiedIsResumedFromItsProgress(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 25)
	sequenceAll(t, pool)
	svc := receipts.NewService(pool).WithVerifyPage(10)
	member := mustUser(t, pool, ws, "member")
	run, err := svc.StartVerification(t.Context(), member, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The dead worker had verified seq 1 to 10 and saved it.
	if _, err := pool.Exec(t.Context(), `UPDATE receipt_verifications v SET status = 'running', attempt = 1, started_at = now() - interval '1 hour',
		heartbeat_at = now() - interval '1 hour', target_seq = 25, checked = 10, head_seq = 10,
		head_hash = (SELECT hash FROM receipt_links WHERE workspace_id = v.workspace_id AND seq = 10) WHERE id = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	// What it verified is not read again: a change there now goes unseen
	// by this run (the next one finds it).
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = jsonb_set(content, '{rationale}', '"changed"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 4)`); err != nil {
		t.Fatal(err)
	}
	if n := runAll(t, svc); n != 1 {
		t.Fatalf("%d runs resumed", n)
	}
	run, err = svc.Verification(t.Context(), member, run.ID)
	if err != nil || run.Status != receipts.VerificationDone || !run.Result.OK || run.Result.Checked != 25 || run.Result.HeadSeq != 25 {
		t.Fatalf("resumed: %+v %+v %v", run, run.Result, err)
	}
	var attempt int
	if err := pool.QueryRow(t.Context(), `SELECT attempt FROM receipt_verifications WHERE id = $1`, run.ID).Scan(&attempt); err != nil || attempt != 2 {
		t.Fatalf("attempt %d, %v; want the second", attempt, err)
	}
	next, _ := svc.StartVerification(t.Context(), member, 0)
	runAll(t, svc)
	if next, _ = svc.Verification(t.Context(), member, next.ID); next.Result.OK || next.Result.FirstBadSeq != 4 {
		t.Fatalf("the next run: %+v", next.Result)
	}
}

// TestVerification_AStoppedWorkerHandsItsRunBack: a worker whose server
// closes mid-run puts the run back in the queue with its progress, and
// the next worker finishes it.
func TestVerification_AStoppedWorkerHandsItsRunBack(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	record(t, pool, ws, 120)
	sequenceAll(t, pool)
	// One receipt a page, with the progress of each saved: the server's
	// close meets it mid-run.
	svc := receipts.NewService(pool).WithVerifyPage(1)
	member := mustUser(t, pool, ws, "member")
	run, _ := svc.StartVerification(t.Context(), member, 0)
	ctx, stop := context.WithCancel(t.Context())
	go func() {
		for {
			var checked int64
			pool.QueryRow(t.Context(), `SELECT checked FROM receipt_verifications WHERE id = $1`, run.ID).Scan(&checked)
			if checked >= 5 || t.Context().Err() != nil {
				stop()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	if _, err := svc.RunVerifications(ctx, slog.New(slog.DiscardHandler)); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	var status string
	var checked int64
	if err := pool.QueryRow(t.Context(), `SELECT status, checked FROM receipt_verifications WHERE id = $1`, run.ID).Scan(&status, &checked); err != nil {
		t.Fatal(err)
	}
	if status != receipts.VerificationQueued || checked < 5 || checked >= 120 {
		t.Fatalf("after the close: %s with %d checked; want queued mid-run", status, checked)
	}
	runAll(t, svc.WithVerifyPage(100))
	if run, _ = svc.Verification(t.Context(), member, run.ID); run.Status != receipts.VerificationDone || !run.Result.OK || run.Result.Checked != 120 {
		t.Fatalf("finished by the next worker: %+v %+v", run, run.Result)
	}
}

func TestVerification_OnlyTheWorkspacesUsers(t *testing.T) {
	t.Parallel()
	pool := mustPool(t)
	ws := mustWorkspace(t, pool, "w")
	svc := receipts.NewService(pool)
	member := mustUser(t, pool, ws, "member")
	run, err := svc.StartVerification(t.Context(), member, 0)
	if err != nil {
		t.Fatal(err)
	}
	agent := member
	agent.Agent, agent.TokenID = true, uuid.New()
	if _, err := svc.StartVerification(t.Context(), agent, 0); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Errorf("an agent started a verification: %v", err)
	}
	if _, err := svc.Verification(t.Context(), agent, run.ID); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Errorf("an agent read a verification: %v", err)
	}
	stranger := mustUser(t, pool, mustWorkspace(t, pool, "other"), "admin")
	if _, err := svc.Verification(t.Context(), stranger, run.ID); err != receipts.ErrVerificationNotFound {
		t.Errorf("another workspace's user read it: %v", err)
	}
	// An empty chain verifies.
	runAll(t, svc)
	if run, err = svc.Verification(t.Context(), member, run.ID); err != nil || !run.Result.OK || run.Result.HeadSeq != 0 || run.TargetSeq != 0 {
		t.Fatalf("the empty chain: %+v %v", run, err)
	}
}
