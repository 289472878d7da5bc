package web_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/views"
)

// runningElsewhere makes a verification that another instance's worker
// runs, alive and through seq checked, and returns its id and a func that
// kills that instance: its heartbeat goes stale, and this server's worker
// resumes the run.
func (e *env) runningElsewhere(checked, target int) (string, func()) {
	e.t.Helper()
	var id string
	if err := e.pool.QueryRow(context.Background(), `INSERT INTO receipt_verifications
		(id, workspace_id, status, attempt, started_at, heartbeat_at, target_seq, checked, head_seq, head_hash)
		SELECT gen_random_uuid(), $1::uuid, 'running', 1, now(), now(), $3, $2, $2,
		       coalesce((SELECT hash FROM receipt_rows WHERE workspace_id = $1::uuid AND seq = $2), '\x'::bytea || decode(repeat('00', 32), 'hex'))
		RETURNING id::text`, e.ws, checked, target).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id, func() {
		e.t.Helper()
		if _, err := e.pool.Exec(context.Background(), `UPDATE receipt_verifications SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
			e.t.Fatal(err)
		}
	}
}

func TestReceiptVerificationsAPI_StartInTheBackgroundAndAnswerAStatusURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("admin@example.com", auth.RoleAdmin)
	e.user("member@example.com", auth.RoleMember)
	admin := e.token("admin@example.com", auth.TokenUser)
	member := e.token("member@example.com", auth.TokenUser)
	agent := e.token("admin@example.com", auth.TokenAgent)
	ids := e.recordReceipts(5)
	last := e.waitChained(admin, ids[4])

	// A run that starts answers at once, 202, with its status URL.
	resp, run := e.api("POST", "/api/v1/receipts/verifications", member, nil)
	if resp.StatusCode != http.StatusAccepted || run["status"] != "queued" || resp.Header.Get("Location") != run["status_url"] ||
		run["status_url"] != "/api/v1/receipts/verifications/"+run["id"].(string) || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("start: %d %v %v", resp.StatusCode, resp.Header, run)
	}
	done := e.pollRun(member, run["status_url"].(string))
	result := done["result"].(map[string]any)
	if done["target_seq"] != 5.0 || done["checked"] != 5.0 || done["finished_at"] == nil || done["started_at"] == nil ||
		result["ok"] != true || result["checked"] != 5.0 || result["head_seq"] != 5.0 || result["head_hash"] != last["hash"] || result["pending"] != 0.0 {
		t.Fatalf("done: %v", done)
	}

	// While a run goes on (on another instance, here), starting one, by
	// anyone of the workspace and either way, joins it.
	id, kill := e.runningElsewhere(2, 5)
	url := "/api/v1/receipts/verifications/" + id
	for _, start := range []struct{ method, path, token string }{{"POST", "/api/v1/receipts/verifications", member}, {"GET", "/api/v1/receipts/verify", admin}} {
		if resp, again := e.api(start.method, start.path, start.token, nil); resp.StatusCode != http.StatusAccepted || again["id"] != id || resp.Header.Get("Location") != url ||
			again["status"] != "running" || again["checked"] != 2.0 || again["target_seq"] != 5.0 {
			t.Fatalf("%s %s while a run goes on: %d %v; want run %s", start.method, start.path, resp.StatusCode, again, id)
		}
	}
	if resp, got := e.api("GET", url, member, nil); resp.StatusCode != http.StatusOK || got["status"] != "running" || got["result"] != nil || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status while it runs: %d %v", resp.StatusCode, got)
	}
	// Agents do none of it; an unknown run is not found.
	for _, c := range []struct{ method, path string }{{"POST", "/api/v1/receipts/verifications"}, {"GET", "/api/v1/receipts/verify"}, {"GET", url}} {
		if resp, p := e.api(c.method, c.path, agent, nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("an agent's %s %s: %d %v", c.method, c.path, resp.StatusCode, p)
		}
	}
	for _, id := range []string{"00000000-0000-7000-8000-000000000000", "not-a-run"} {
		if resp, _ := e.api("GET", "/api/v1/receipts/verifications/"+id, member, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("run %s: %d", id, resp.StatusCode)
		}
	}

	// Its instance dies: this server's worker resumes it from seq 3.
	kill()
	if result := e.pollRun(member, url)["result"].(map[string]any); result["ok"] != true || result["checked"] != 5.0 || result["head_hash"] != last["hash"] {
		t.Fatalf("resumed: %v", result)
	}

	// A tampered chain: the next run ends not ok at the first bad seq.
	if _, err := e.pool.Exec(context.Background(), `UPDATE receipts SET content = content || '{"rationale":"changed"}' WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 3)`); err != nil {
		t.Fatal(err)
	}
	resp, next := e.api("POST", "/api/v1/receipts/verifications", member, nil)
	if resp.StatusCode != http.StatusAccepted || next["id"] == run["id"] || next["id"] == id {
		t.Fatalf("a start after the run ended: %d %v", resp.StatusCode, next)
	}
	result = e.pollRun(member, next["status_url"].(string))["result"].(map[string]any)
	if result["ok"] != false || result["first_bad_seq"] != 3.0 || result["checked"] != 2.0 || !strings.Contains(result["reason"].(string), "content_hash") {
		t.Fatalf("tampered: %v", result)
	}
}

// pollRun polls a verification's status URL until it ends.
func (e *env) pollRun(token, url string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, run := e.api("GET", url, token, nil)
		if resp.StatusCode != http.StatusOK {
			e.t.Fatalf("status: %d %v", resp.StatusCode, run)
		}
		if run["status"] == "done" {
			if resp.Header.Get("Retry-After") != "" {
				e.t.Errorf("a finished run says to retry")
			}
			return run
		}
		if run["status"] == "failed" || time.Now().After(deadline) {
			e.t.Fatalf("run: %v", run)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var pollsItself = regexp.MustCompile(`hx-get="/admin/receipts/verifications/([0-9a-f-]{36})" hx-trigger="load delay:1s" hx-swap="outerHTML" aria-busy="true"`)

func TestReceiptsPage_VerifyNowShowsProgressThenTheResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	browser := e.user("admin@example.com", auth.RoleAdmin)
	token := e.token("admin@example.com", auth.TokenUser)
	ids := e.recordReceipts(3)
	r := e.waitChained(token, ids[2])
	if _, page := browser.get("/admin/receipts"); !strings.Contains(page, "Not verified yet.") || strings.Contains(page, "verification-progress") {
		t.Fatalf("before any verification:\n%s", page)
	}
	htmx := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("HX-Request", "true")
		resp, err := browser.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		frag := readBody(t, resp)
		if resp.StatusCode != http.StatusOK || strings.Contains(frag, "<html") {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, frag)
		}
		return frag
	}

	// A run goes on (on another instance, here): "Verify now" joins it
	// and answers, within its short wait, the run's progress, which asks
	// for itself again.
	id, kill := e.runningElsewhere(1, 3)
	start := time.Now()
	frag := htmx("/admin/receipts/verify")
	m := pollsItself.FindStringSubmatch(frag)
	if m == nil || m[1] != id || !strings.Contains(frag, `data-status="running"`) || !strings.Contains(frag, `1</span> of 3 receipts`) || !strings.Contains(frag, `value="33"`) {
		t.Fatalf("Verify now while a run goes on:\n%s", frag)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Verify now took %v", d)
	}
	if again := htmx("/admin/receipts/verifications/" + id); !pollsItself.MatchString(again) {
		t.Fatalf("the progress, polled:\n%s", again)
	}
	if _, page := browser.get("/admin/receipts"); !pollsItself.MatchString(page) {
		t.Fatalf("the page does not show the run that goes on:\n%s", page)
	}
	// Its instance dies; this server's worker finishes it.
	kill()
	deadline := time.Now().Add(30 * time.Second)
	for {
		frag = htmx("/admin/receipts/verifications/" + m[1])
		if strings.Contains(frag, `data-testid="verification-ok"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the result never came:\n%s", frag)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pollsItself.MatchString(frag) || !strings.Contains(frag, "3 receipts, head seq 3") {
		t.Fatalf("the result:\n%s", frag)
	}
	// The page shows the verified head.
	if _, page := browser.get("/admin/receipts"); !strings.Contains(page, `seq <strong>3</strong> · <code class="small">`+r["hash"].(string)) {
		t.Fatalf("the verified head:\n%s", page)
	}
	// A run waiting for a worker says so, and polls too.
	var b bytes.Buffer
	if err := views.VerificationRun(views.VerificationRunView{ID: id, Status: "queued", Checked: "0", Percent: "0"}).Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !pollsItself.MatchString(s) || !strings.Contains(s, "Verification queued") {
		t.Fatalf("a queued verification:\n%s", s)
	}
	// An unknown run is not found.
	req, _ := http.NewRequest("GET", e.url+"/admin/receipts/verifications/"+strings.Repeat("0", 8)+"-0000-7000-8000-000000000000", nil)
	if resp, err := browser.http.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown run: %v %v", resp.StatusCode, err)
	}
}
