package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestIntent_FullTextSearchFindsCallsByARationaleWordAndCountsThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("admin@example.com", auth.TokenAgent)
	user := e.token("admin@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "c"})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	put := func(key, rationale string) string {
		resp, body := e.api("POST", calls, agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "c", "key": key, "value": map[string]any{}}, "rationale": rationale})
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("put %s: %d %v", key, resp.StatusCode, body)
		}
		return body["proposal_id"].(string)
	}
	put("a", "reconcile the quarterly invoices for ACME")
	rejected := put("b", "reconcile the invoices a second time")
	edited := put("c", "archive the old notes nobody reads")
	if resp, body := e.api("POST", "/api/v1/proposals/"+rejected+"/reject", user, map[string]any{"reason": "not now"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("reject: %d %v", resp.StatusCode, body)
	}
	if resp, body := e.api("POST", "/api/v1/proposals/"+edited+"/apply", user, map[string]any{"arguments": map[string]any{"collection": "c", "key": "c2", "value": map[string]any{}}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("apply edited: %d %v", resp.StatusCode, body)
	}
	// Refused at the gate (no webhook domain is allowed): only an audit row.
	if resp, body := e.api("POST", calls, agent, map[string]any{"tool": "webhook.post", "idempotency_key": "intent-test-key-0001", "arguments": map[string]any{"url": "https://hooks.example.com/x", "payload": map[string]any{}},
		"rationale": "tell the invoices channel"}); resp.StatusCode < 400 {
		t.Fatalf("webhook: %d %v", resp.StatusCode, body)
	}

	resp, body := e.api("GET", "/admin/intent?q=invoices", user, nil)
	if resp.StatusCode != http.StatusOK || body["total"] != float64(3) || len(body["calls"].([]any)) != 3 {
		t.Fatalf("q=invoices: %d %v", resp.StatusCode, body)
	}
	groups := map[string]map[string]any{}
	for _, g := range body["groups"].([]any) {
		g := g.(map[string]any)
		groups[g["tool"].(string)] = g
	}
	if g := groups["records.put"]; g == nil || g["calls"] != float64(2) || g["refused"] != float64(1) || g["edited"] != float64(0) || g["refused_share"] != 0.5 {
		t.Errorf("records.put: %v", g)
	}
	if g := groups["webhook.post"]; g == nil || g["calls"] != float64(1) || g["refused"] != float64(1) {
		t.Errorf("webhook.post: %v", g)
	}
	_, body = e.api("GET", "/admin/intent?q=archive", user, nil)
	if gs := body["groups"].([]any); body["total"] != float64(1) || len(gs) != 1 || gs[0].(map[string]any)["edited"] != float64(1) {
		t.Errorf("q=archive: %v", body)
	}
	_, body = e.api("GET", "/admin/intent", user, nil)
	if body["total"] != float64(4) {
		t.Errorf("no q: %v", body["total"])
	}
	_, body = e.api("GET", "/admin/intent?until=2000-01-01", user, nil)
	if body["total"] != float64(0) {
		t.Errorf("a period before the calls: %v", body["total"])
	}
	resp, page := admin.get("/admin/intent?" + url.Values{"q": {"quarterly"}}.Encode())
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "reconcile the quarterly invoices for ACME") || strings.Contains(page, "a second time") {
		t.Errorf("page: %d", resp.StatusCode)
	}
	// Approvers and members do not see it.
	if resp, _ := e.api("GET", "/admin/intent", e.token("boss@example.com", auth.TokenUser), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("approver: %d", resp.StatusCode)
	}
}
