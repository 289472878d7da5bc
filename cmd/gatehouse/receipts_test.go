package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// verifyCLI runs `gatehouse receipts verify args…` and returns its exit
// status and output.
func (s *server) verifyCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut strings.Builder
	err := run(context.Background(), append([]string{"receipts", "verify"}, args...), s.getenv, strings.NewReader(""), &out, &errOut)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return exitCode(err), out.String() + errOut.String()
}

func getBody(t *testing.T, url, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

func TestReceiptsVerify_ExitCodesAndACheckpointSavedEarlier(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	url := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL": url, "GATEHOUSE_ADMIN_EMAIL": "root@example.com", "GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
		"GATEHOUSE_RECEIPT_KEY_FILE": filepath.Join(dir, "server.key"),
	})
	token := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "user", "--name", "auditor"))
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var ws uuid.UUID
	if err := pool.QueryRow(t.Context(), "SELECT id FROM workspaces").Scan(&ws); err != nil {
		t.Fatal(err)
	}
	record := func(n int) {
		for i := range n {
			if _, err := receipts.Record(t.Context(), db.New(pool), ws, receipts.Content{Kind: receipts.KindExecution, Tool: "records.put",
				Arguments: json.RawMessage(`{"key":"k","n":` + strings.Repeat("1", i+1) + `}`)}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		// The server's sequencer chains them within a second.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var pending int
			pool.QueryRow(t.Context(), "SELECT count(*) FROM receipt_rows WHERE seq IS NULL").Scan(&pending)
			if pending == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d receipts still pending", pending)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The server records receipts of its own at start (the policy
	// version's): the chain's head counts them too.
	var base int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM receipt_rows").Scan(&base); err != nil {
		t.Fatal(err)
	}
	head := func(n int) string { return fmt.Sprintf(`"head_seq":%d`, base+n) }
	record(4)
	if code, out := s.verifyCLI(t); code != 0 || !strings.Contains(out, `"ok":true`) || !strings.Contains(out, head(4)) {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}

	// An auditor saves a checkpoint and the public key.
	cpFile, pkFile := filepath.Join(dir, "checkpoint.json"), filepath.Join(dir, "public-key.json")
	os.WriteFile(cpFile, getBody(t, s.URL+"/api/v1/receipts/checkpoint", token), 0o600)
	os.WriteFile(pkFile, getBody(t, s.URL+"/api/v1/receipts/public-key", token), 0o600)
	record(2)
	for _, args := range [][]string{{"--checkpoint", cpFile}, {"--checkpoint", cpFile, "--public-key", pkFile}} {
		if code, out := s.verifyCLI(t, args...); code != 0 || !strings.Contains(out, head(6)) {
			t.Fatalf("verify %v: exit %d\n%s", args, code, out)
		}
	}
	// A checkpoint changed after it was signed is refused.
	b, _ := os.ReadFile(cpFile)
	forged := filepath.Join(dir, "forged.json")
	os.WriteFile(forged, []byte(strings.Replace(string(b), fmt.Sprintf(`"seq":%d`, base+4), fmt.Sprintf(`"seq":%d`, base+3), 1)), 0o600)
	if code, out := s.verifyCLI(t, "--checkpoint", forged, "--public-key", pkFile); code != 3 || !strings.Contains(out, "signature does not verify") {
		t.Fatalf("forged checkpoint: exit %d\n%s", code, out)
	}
	if code, out := s.verifyCLI(t, "--public-key", pkFile); code != 2 {
		t.Fatalf("--public-key alone: exit %d\n%s", code, out)
	}
	noKey := &server{env: map[string]string{"DATABASE_URL": url, "GATEHOUSE_RECEIPT_KEY_FILE": filepath.Join(dir, "none.key")}}
	if code, out := noKey.verifyCLI(t, "--checkpoint", cpFile); code != 2 || !strings.Contains(out, "--public-key") {
		t.Fatalf("a checkpoint without any public key: exit %d\n%s", code, out)
	}

	// Someone with database access changes seq 2 and recomputes every hash
	// after it: the chain verifies on its own, but not against the
	// checkpoint saved before.
	if _, err := pool.Exec(t.Context(), `UPDATE receipts SET content = jsonb_set(content, '{tool}', '"nothing.happened"') WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 2)`); err != nil {
		t.Fatal(err)
	}
	if code, out := s.verifyCLI(t); code != 3 || !strings.Contains(out, `"first_bad_seq":2`) {
		t.Fatalf("changed content: exit %d\n%s", code, out)
	}
	// From the checkpoint (the fourth receipt) it reads from there on,
	// nothing before: the change at seq 2 is the full verification's to
	// find.
	if code, out := s.verifyCLI(t, "--checkpoint", cpFile, "--public-key", pkFile); code != 0 || !strings.Contains(out, `"checked":3`) ||
		!strings.Contains(out, fmt.Sprintf(`"from_seq":%d`, base+4)) {
		t.Fatalf("changed content before the checkpoint, verified from it: exit %d\n%s", code, out)
	}
	rewriteChain(t, pool, ws)
	if code, out := s.verifyCLI(t); code != 0 {
		t.Fatalf("a consistently rewritten chain verifies on its own: exit %d\n%s", code, out)
	}
	code, out := s.verifyCLI(t, "--checkpoint", cpFile, "--public-key", pkFile)
	if code != 3 || !strings.Contains(out, fmt.Sprintf(`"first_bad_seq":%d`, base+4)) || !strings.Contains(out, "checkpoint") {
		t.Fatalf("rewritten chain against the checkpoint: exit %d\n%s", code, out)
	}
}

// rewriteChain recomputes every content_hash, prev_hash and hash of a
// workspace's chain, as an attacker with database access would.
func rewriteChain(t *testing.T, pool *pgxpool.Pool, ws uuid.UUID) {
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

func TestServe_ReceiptKeyFileIsGeneratedThenReusedAndABadOneStopsTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "keys", "receipt-signing.key")
	env := map[string]string{"DATABASE_URL": dbtest.MustURL(t), "GATEHOUSE_RECEIPT_KEY_FILE": keyFile}
	s := startServer(t, env)
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Split(string(key), "\n")[1]
	log := s.stderr.String()
	if !strings.Contains(log, "generated the receipt signing key") || strings.Contains(log, body) {
		t.Fatalf("first start log:\n%s", log)
	}
	s.stop(t)

	again := startServer(t, env)
	if log := again.stderr.String(); strings.Contains(log, "generated the receipt signing key") || strings.Contains(log, body) {
		t.Fatalf("second start log:\n%s", log)
	}
	if now, _ := os.ReadFile(keyFile); string(now) != string(key) {
		t.Fatal("the key was replaced on restart")
	}
	again.stop(t)

	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key\n"), 0o600)
	err = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string {
		return map[string]string{"DATABASE_URL": env["DATABASE_URL"], "GATEHOUSE_RECEIPT_KEY_FILE": bad}[k]
	}, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "receipt signing key "+bad) || exitCode(err) != 1 {
		t.Fatalf("serve with a bad key file: %v", err)
	}
}
