package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The policy files the reload tests switch between: A says nothing of
// records.put, so an auto-mode conversation's records.put applies at once;
// B gates its calls above an amount (deferred to an approver); bad does
// not parse (line 5).
const (
	reloadFileA = "tools:\n  records.get:\n    rate_limits: {per_agent_per_minute: 120}\n"
	reloadFileB = reloadFileA + "  records.put:\n    threshold: \"value.amount > 100\"\n"
	reloadBad   = "tools:\n  records.get:\n    rate_limits: {per_agent_per_minute: 120}\n  records.put:\n    threshold: \"value.amount >\"\n"
)

// reloadServer is a real server on a policy file, a user token and an
// auto-mode conversation of the admin.
type reloadServer struct {
	*server
	path, token, conv string
	url               string
	admin             *http.Client
}

func startReloadServer(t *testing.T, file string) *reloadServer {
	t.Helper()
	dir := t.TempDir()
	path := writeFile(t, dir, "gatehouse.yaml", file)
	url := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             url,
		"GATEHOUSE_POLICY_FILE":    path,
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	r := &reloadServer{server: s, path: path, url: url}
	r.token = strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "user", "--name", "script"))
	status, conv := r.api(t, http.MethodPost, "/api/v1/conversations", map[string]any{"title": "Reloads"})
	if status != http.StatusCreated {
		t.Fatalf("create a conversation: %d %v", status, conv)
	}
	r.conv = conv["id"].(string)
	if status, out := r.api(t, http.MethodPatch, "/api/v1/conversations/"+r.conv, map[string]any{"permission_mode": "auto"}); status != http.StatusOK {
		t.Fatalf("auto mode: %d %v", status, out)
	}
	r.admin = signIn(t, s.URL, "root@example.com", "the admin's password")
	return r
}

func (r *reloadServer) api(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, r.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// put proposes a records.put of an amount and returns the answer's
// status: 200 applied at once, 202 waiting (deferred to an approver).
func (r *reloadServer) put(t *testing.T, amount int) (int, map[string]any) {
	t.Helper()
	return r.api(t, http.MethodPost, "/api/v1/conversations/"+r.conv+"/tool-calls", map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "invoices", "key": "inv-" + time.Now().Format("150405.000000"), "value": map[string]any{"amount": amount}},
		"rationale": "record the invoice the customer sent"})
}

// adminPage is /admin as the admin sees it.
func (r *reloadServer) adminPage(t *testing.T) string {
	t.Helper()
	resp, err := r.admin.Get(r.URL + "/admin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin: %d\n%s", resp.StatusCode, b)
	}
	return string(b)
}

// waitLog waits until the server's log holds want n times.
func (r *reloadServer) waitLog(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(r.stderr.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %s %d times:\n%s", want, n, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// policyChanges are the workspace's policy.changed audit rows' hashes, in
// order.
func (r *reloadServer) policyChanges(t *testing.T) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT data->>'hash' FROM audit_events WHERE action = 'policy.changed' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return hashes
}

func (r *reloadServer) waitPolicyChanges(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := r.policyChanges(t)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d policy.changed rows, want %d", len(got), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replaceFile writes the policy file as editors save it: beside it, then
// renamed over it, so that a reload never reads it half written.
func (r *reloadServer) replaceFile(t *testing.T, text string) {
	t.Helper()
	tmp := writeFile(t, filepath.Dir(r.path), ".gatehouse.yaml.tmp", text)
	if err := os.Rename(tmp, r.path); err != nil {
		t.Fatal(err)
	}
}

func sighup(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// TestServe_SIGHUPReloadsTheFileAndABadOneKeepsTheLastGood: a threshold
// the new file adds holds the next call for an approver, the change is
// audited with the registry's new hash, and a file that does not parse
// changes nothing: the last good one stays in force and /admin names the
// line.
func TestServe_SIGHUPReloadsTheFileAndABadOneKeepsTheLastGood(t *testing.T) {
	r := startReloadServer(t, reloadFileA)
	if status, out := r.put(t, 500); status != http.StatusOK || out["status"] != "applied" {
		t.Fatalf("under file A: %d %v", status, out)
	}
	first := r.waitPolicyChanges(t, 1)

	r.replaceFile(t, reloadFileB)
	sighup(t)
	r.waitLog(t, `"msg":"policy file reloaded","path":"`+r.path+`","trigger":"SIGHUP"`, 1)
	if status, out := r.put(t, 500); status != http.StatusAccepted || out["requires_human_approval"] != true {
		t.Fatalf("under file B, above the threshold: %d %v", status, out)
	}
	if status, out := r.put(t, 50); status != http.StatusOK {
		t.Fatalf("under file B, below the threshold: %d %v", status, out)
	}
	changes := r.waitPolicyChanges(t, 2)
	if changes[len(changes)-1] == first[0] {
		t.Fatalf("policy.changed rows %v: the reload recorded no new hash", changes)
	}
	page := r.adminPage(t)
	if !strings.Contains(page, `data-testid="policy-hash" title="`+changes[len(changes)-1]+`"`) || !strings.Contains(page, r.path) {
		t.Fatalf("/admin does not show the policy in force (%s):\n%s", changes[len(changes)-1], page)
	}

	r.replaceFile(t, reloadBad)
	sighup(t)
	r.waitLog(t, `"msg":"policy file not reloaded: the last good one stays in force","path":"`+r.path+`","trigger":"SIGHUP","line":5`, 1)
	if status, out := r.put(t, 500); status != http.StatusAccepted {
		t.Fatalf("after a bad file, file B still holds: %d %v\n%s", status, out, r.stderr.String())
	}
	page = r.adminPage(t)
	for _, want := range []string{`data-testid="policy-error"`, `data-testid="policy-error-line">5<`, "threshold", `data-testid="policy-instance"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("/admin lacks %s after a bad file:\n%s", want, page)
		}
	}
	if got := r.policyChanges(t); len(got) != len(changes) {
		t.Fatalf("a bad file recorded a policy change: %v", got)
	}

	r.replaceFile(t, reloadFileA)
	sighup(t)
	r.waitLog(t, `"msg":"policy file reloaded","path":"`+r.path+`","trigger":"SIGHUP"`, 2)
	if status, out := r.put(t, 500); status != http.StatusOK {
		t.Fatalf("file A again: %d %v", status, out)
	}
	if page := r.adminPage(t); strings.Contains(page, `data-testid="policy-error"`) {
		t.Fatalf("/admin still shows the error once a good file is loaded:\n%s", page)
	}
	if got := r.waitPolicyChanges(t, 3); got[len(got)-1] != first[0] {
		t.Fatalf("back to file A, the policy's hash is %s, not A's %s", got[len(got)-1], first[0])
	}
}

// TestServe_AFileSavedByRenameIsReloaded is an editor's save: the new file
// written beside the old one and renamed over it, seen by the watcher.
func TestServe_AFileSavedByRenameIsReloaded(t *testing.T) {
	t.Parallel()
	r := startReloadServer(t, reloadFileA)
	if status, _ := r.put(t, 500); status != http.StatusOK {
		t.Fatalf("under file A: %d", status)
	}
	tmp := writeFile(t, filepath.Dir(r.path), ".gatehouse.yaml.swp", reloadFileB)
	if err := os.Rename(tmp, r.path); err != nil {
		t.Fatal(err)
	}
	r.waitLog(t, `"msg":"policy file reloaded","path":"`+r.path+`","trigger":"file change"`, 1)
	if status, out := r.put(t, 500); status != http.StatusAccepted {
		t.Fatalf("under file B: %d %v", status, out)
	}
	if page := r.adminPage(t); !strings.Contains(page, "file change") || !strings.Contains(page, "this one") {
		t.Fatalf("/admin does not say the file change loaded it:\n%s", page)
	}
}

// TestPolicyCheck_TheSettingsSection: what the file sets and pins, or a
// bad setting with its line.
func TestPolicyCheck_TheSettingsSection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"GATEHOUSE_DATA_DIR": dir}
	good := writeFile(t, dir, "good.yaml", "settings:\n  auto_approve_high_risk: false\n  rationale_min_length: 20\n  pinned: [auto_approve_high_risk]\n")
	if code, out, errs := policyCLI(t, env, "check", good); code != 0 || !strings.Contains(out, "settings auto_approve_high_risk (pinned), rationale_min_length") {
		t.Fatalf("a good file: exit %d\n%s%s", code, out, errs)
	}
	bad := writeFile(t, dir, "bad.yaml", "settings:\n  rationale_min_length: 20\n  pinned: [rationale_min_length, auto_approve_high_risk]\n")
	if code, _, errs := policyCLI(t, env, "check", bad); code != 1 || !strings.Contains(errs, "line 3") || !strings.Contains(errs, "auto_approve_high_risk is pinned but not set") {
		t.Fatalf("a bad file: exit %d\n%s", code, errs)
	}
}
