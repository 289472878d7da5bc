package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/replay/replaytest"
)

// countRows is how many rows the tables a replay could write hold.
func countRows(t *testing.T, e *env) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"proposals", "approvals", "audit_events", "receipts", "evidence", "upstream_tools"} {
		var n int
		if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func TestReplayPage_AdminSeesWhatAFileWouldChangeOthersAreRefused(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	registry := replaytest.MustRegistry(t)
	e := newEnvWith(t, pool, registry)
	replaytest.MustPin(t, pool)
	admin := e.user("root@example.com", auth.RoleAdmin)
	member := e.user("member@example.com", auth.RoleMember)
	approver := e.user("boss@example.com", auth.RoleApprover)
	rec := replaytest.MustRecord(t, pool, registry, "member@example.com")

	resp, body := admin.get("/admin/policy/replay")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="replay-policy"`) || !strings.Contains(body, `value="7d" checked`) {
		t.Fatalf("the form: %d\n%s", resp.StatusCode, body)
	}
	before := countRows(t, e)
	resp, body = admin.postForm("/admin/policy/replay", url.Values{"policy": {replaytest.LoosenFile}, "period": {"1d"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="replay-calls">10<`) || !strings.Contains(body, `data-testid="replay-newly-allowed">3<`) ||
		!strings.Contains(body, `data-testid="replay-newly-asks">0<`) || !strings.Contains(body, "up.write") ||
		!strings.Contains(body, `href="/audit?object=`+rec.Rejected.String()+`"`) || strings.Contains(body, "replay-stopped-early") {
		t.Fatalf("the report: %d\n%s", resp.StatusCode, body)
	}
	// The file typed stays in the form.
	if !strings.Contains(body, html.EscapeString("effect: read")) {
		t.Fatal("the form lost the file")
	}
	for table, n := range countRows(t, e) {
		if before[table] != n {
			t.Fatalf("the replay wrote to %s: %d rows, then %d", table, before[table], n)
		}
	}

	// A bad file: each error with its line, in the page, 422.
	bad := "upstreams:\n  - name: up\n    url: http://127.0.0.1:9/mcp\n    tools:\n      fetch:\n        effect: sideways\n"
	resp, body = admin.postForm("/admin/policy/replay", url.Values{"policy": {bad}, "period": {"7d"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="replay-policy-error"`) || !strings.Contains(body, "line 6") ||
		strings.Contains(body, `data-testid="replay-report"`) {
		t.Fatalf("a bad file: %d\n%s", resp.StatusCode, body)
	}
	if resp, body := admin.postForm("/admin/policy/replay", url.Values{"policy": {replaytest.TightenFile}, "period": {"1y"}}); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "must be 1d, 7d or 30d") {
		t.Fatalf("a bad period: %d", resp.StatusCode)
	}

	// Members and approvers are refused, the form and the replay alike.
	for name, c := range map[string]*client{"member": member, "approver": approver} {
		if resp, _ := c.get("/admin/policy/replay"); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s opens the page: %d", name, resp.StatusCode)
		}
		c.get("/")
		if resp, body := c.postForm("/admin/policy/replay", url.Values{"policy": {replaytest.TightenFile}, "period": {"7d"}}); resp.StatusCode != http.StatusForbidden ||
			strings.Contains(body, "replay-report") {
			t.Fatalf("%s replays: %d", name, resp.StatusCode)
		}
	}
	// Without the CSRF token, nothing runs.
	if resp, _ := admin.postForm("/admin/policy/replay", url.Values{"policy": {replaytest.TightenFile}, "period": {"7d"}, "_csrf": {"forged"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged CSRF token: %d", resp.StatusCode)
	}
}
