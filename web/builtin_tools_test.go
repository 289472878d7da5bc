package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The built-in tools of the contracts issue, end to end through the API.
func TestBuiltinTools_EachLayerDecidesForReal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})
	call := func(token, tool string, args map[string]any, key string) (*http.Response, map[string]any) {
		return e.api("POST", base+"/tool-calls", token, map[string]any{"tool": tool, "arguments": args,
			"rationale": "the owner asked for this", "idempotency_key": key})
	}

	// email.send is high risk: deferred to an approver, even in auto mode;
	// approved, it lands in the outbox an approver can read.
	resp, p := call(agent, "email.send", map[string]any{"to": "ana@example.net", "subject": "Hi", "body": "Hello"}, "email-ana-0000000001")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["action_class"] != "email.send.external" ||
		p["summary"] != "Send email to ana@example.net: Hi" {
		t.Fatalf("email.send: %d %v", resp.StatusCode, p)
	}
	boss := e.user("boss@example.com", auth.RoleApprover)
	if status, out := adminJSON(t, e, "POST", "/admin/approvals/"+p["approval_id"].(string)+"/approve", e.token("boss@example.com", auth.TokenUser), map[string]any{}); status != http.StatusOK {
		t.Fatalf("approve the email: %d %v", status, out)
	}
	if _, page := boss.get("/admin/outbox"); !strings.Contains(page, "ana@example.net") || !strings.Contains(page, "Hello") {
		t.Fatalf("the outbox does not show the email:\n%s", page)
	}

	// payment.initiate is human-only: 403 with the decision; the owner
	// records that they performed it, once; an agent cannot.
	resp, p = call(agent, "payment.initiate", map[string]any{"amount": 1250.35, "currency": "EUR", "payee": "ACME GmbH"}, "pay-acme-00000000001")
	decision, _ := p["decision"].(map[string]any)
	if resp.StatusCode != http.StatusForbidden || decision["state"] != "human_only" || p["proposal_id"] == nil {
		t.Fatalf("payment.initiate: %d %v", resp.StatusCode, p)
	}
	performed := "/api/v1/proposals/" + p["proposal_id"].(string) + "/performed"
	if resp, q := e.api("POST", performed, agent, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent records the payment: %d %v", resp.StatusCode, q)
	}
	if resp, q := e.api("POST", "/api/v1/proposals/"+p["proposal_id"].(string)+"/apply", user, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the owner applies a human-only call: %d %v", resp.StatusCode, q)
	}
	resp, q := e.api("POST", performed, user, nil)
	if resp.StatusCode != http.StatusOK || q["status"] != "applied" || q["result"].(map[string]any)["status"] != "performed" {
		t.Fatalf("the owner records the payment: %d %v", resp.StatusCode, q)
	}
	if resp, _ := e.api("POST", performed, user, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("recorded twice: %d", resp.StatusCode)
	}

	// webhook.post reaches only hosts on the workspace's allowlist; being
	// high risk, a call to one waits for an approver, even in auto mode.
	var got string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hook.Close()
	payload := map[string]any{"event": "renewed"}
	resp, p = call(agent, "webhook.post", map[string]any{"url": hook.URL + "/in", "payload": payload}, "hook-renewed-0000001")
	if resp.StatusCode != http.StatusForbidden || p["constraint"] != "domain_allowlist" || got != "" {
		t.Fatalf("webhook off the allowlist: %d %v", resp.StatusCode, p)
	}
	e.pool.Exec(t.Context(), "UPDATE workspaces SET webhook_allowlist = '{127.0.0.1}'")
	resp, p = call(agent, "webhook.post", map[string]any{"url": hook.URL + "/in", "payload": payload}, "hook-renewed-0000002")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || got != "" {
		t.Fatalf("webhook on the allowlist: %d %v (server got %q)", resp.StatusCode, p, got)
	}
	status, out := adminJSON(t, e, "POST", "/admin/approvals/"+p["approval_id"].(string)+"/approve", e.token("boss@example.com", auth.TokenUser), map[string]any{})
	if status != http.StatusOK || out["proposal"].(map[string]any)["status"] != "applied" || !strings.Contains(got, `"renewed"`) {
		t.Fatalf("webhook approved: %d %v (server got %q)", status, out, got)
	}

	// records.bulk_delete needs an approver above ten keys, even where the
	// trust level would run it.
	_, nb := e.api("POST", "/api/v1/notebooks", agent, map[string]any{})
	e.api("PATCH", "/api/v1/notebooks/"+nb["id"].(string), user, map[string]any{"trust_level": "autonomous"})
	keys := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "k" + strings.Repeat("x", i)
		}
		return out
	}
	nbCall := func(n int, key string) (*http.Response, map[string]any) {
		// Several bulk deletes a minute: more than the irreversible class's
		// default of one per agent, which this test is not about.
		e.pool.Exec(t.Context(), "DELETE FROM rate_counters")
		return e.api("POST", "/api/v1/notebooks/"+nb["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.bulk_delete",
			"arguments": map[string]any{"collection": "c", "keys": keys(n)}, "rationale": "clean up the old rows", "idempotency_key": key})
	}
	// High risk: even three keys wait for an approver...
	if resp, p := nbCall(3, "bulk-three-risk-0001"); resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" {
		t.Fatalf("three keys: %d %v", resp.StatusCode, p)
	}
	// ...and with high risk auto-approved, the contract's threshold
	// still sends more than ten keys to one.
	e.pool.Exec(t.Context(), "UPDATE workspaces SET auto_approve_high_risk = true")
	if resp, p := nbCall(3, "bulk-three-000000001"); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
		t.Fatalf("three keys, high risk auto-approved: %d %v", resp.StatusCode, p)
	}
	if resp, p := nbCall(11, "bulk-eleven-00000001"); resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" {
		t.Fatalf("eleven keys: %d %v", resp.StatusCode, p)
	}
}
