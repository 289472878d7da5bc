package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestRationaleMode_WarnAcceptsAMissingRationaleUntilItsEndDate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	agent := e.token("admin@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "c"})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	call := func(rationale string) (*http.Response, map[string]any) {
		body := map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}}
		if rationale != "" {
			body["rationale"] = rationale
		}
		return e.api("POST", calls, agent, body)
	}
	// Strict by default: missing and short are refused, naming the field.
	for _, r := range []string{"", "short"} {
		if resp, body := call(r); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body["detail"].(string), "rationale") {
			t.Fatalf("strict, rationale %q: %d %v", r, resp.StatusCode, body)
		}
	}
	admin.get("/admin/settings")
	// Warn needs an end date in the future.
	for _, until := range []string{"", time.Now().AddDate(0, 0, -1).Format(time.DateOnly)} {
		resp, page := admin.postForm("/admin/settings", url.Values{"rationale_min_length": {"10"}, "rationale_mode": {"warn"}, "rationale_warn_until": {until}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "must be in the future") {
			t.Errorf("warn until %q: %d", until, resp.StatusCode)
		}
	}
	until := time.Now().AddDate(0, 0, 3).UTC().Format(time.DateOnly)
	if resp, _ := admin.postForm("/admin/settings", url.Values{"rationale_min_length": {"10"}, "rationale_mode": {"warn"}, "rationale_warn_until": {until}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set warn: %d", resp.StatusCode)
	}
	var audited int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed' AND data->>'setting' IN ('rationale_mode', 'rationale_warn_until')").Scan(&audited)
	if audited != 2 {
		t.Errorf("the mode change left %d audit rows, want 2", audited)
	}
	for _, r := range []string{"", "short"} {
		resp, body := call(r)
		if resp.StatusCode >= 300 || !strings.HasPrefix(resp.Header.Get("Warning"), `299 - "rationale missing or short; accepted until `+until) {
			t.Fatalf("warn, rationale %q: %d %q %v", r, resp.StatusCode, resp.Header.Get("Warning"), body)
		}
	}
	if resp, _ := call("a rationale long enough"); resp.Header.Get("Warning") != "" {
		t.Errorf("a good rationale got a warning: %q", resp.Header.Get("Warning"))
	}
	var warned int
	e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE (data->>'rationale_warning')::boolean").Scan(&warned)
	if warned != 2 {
		t.Errorf("%d audit rows carry the warning, want 2", warned)
	}
	// Over 500 characters is refused even in warn mode.
	if resp, _ := call(strings.Repeat("x", 501)); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("a 501-character rationale in warn mode: %d", resp.StatusCode)
	}
	// After the end date it is strict again by itself.
	if _, err := e.pool.Exec(context.Background(), "UPDATE workspaces SET rationale_warn_until = now() - interval '1 minute'"); err != nil {
		t.Fatal(err)
	}
	if resp, body := call(""); resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("Warning") != "" {
		t.Errorf("after the end date: %d %v", resp.StatusCode, body)
	}
	if _, page := admin.get("/admin/settings"); !strings.Contains(page, "Warn mode has ended") {
		t.Errorf("the settings page does not say warn mode ended")
	}
}
