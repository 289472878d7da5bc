package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The Trust Graduation Protocol's invariants with the workspace's default
// settings and evidence recorded through the service (POST
// /api/v1/evidence), in both scopes (issue 31 item 8; the companion of
// TestTrustInvariants_EvidenceNeverDecidesACall): the external-effect
// classes email.send.external and webhook.post made graduation-ready, and
// draft.compose too, change no decision, layer by layer. In an auto
// conversation and an autonomous notebook, where the scope lets a change
// run, the email and the webhook still wait for an approver, nothing
// reaches the outside, and the mode and trust level are what the owner set.
// Were the posterior wired into the decision (or the hint into the
// setting), the decisions or the settings would differ here.
func TestTrustInvariants_AReadyPosteriorOpensNoGateInEitherScope(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	if _, err := e.pool.Exec(t.Context(), `UPDATE workspaces SET webhook_allowlist = '{127.0.0.1}'`); err != nil {
		t.Fatal(err)
	}
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "outreach"})
	_, nb := e.api("POST", "/api/v1/notebooks", agent, map[string]any{"title": "outreach"})
	convPath, nbPath := "/api/v1/conversations/"+conv["id"].(string), "/api/v1/notebooks/"+nb["id"].(string)
	if resp, c := e.api("PATCH", convPath, owner, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("auto mode: %d %v", resp.StatusCode, c)
	}
	if resp, c := e.api("PATCH", nbPath, owner, map[string]any{"trust_level": "autonomous"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("autonomous: %d %v", resp.StatusCode, c)
	}

	n := 0
	calls := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, scope := range []string{convPath, nbPath} {
			for _, c := range []map[string]any{
				{"tool": "email.send", "arguments": map[string]any{"to": "buyer@elsewhere.example", "subject": "Offer", "body": "Our offer stands."}},
				{"tool": "webhook.post", "arguments": map[string]any{"url": hook.URL + "/deal", "payload": map[string]any{"stage": "offer"}}},
			} {
				n++
				c["rationale"], c["idempotency_key"] = "tell the buyer about the offer", fmt.Sprintf("invariant-call-%06d", n)
				resp, p := e.api("POST", scope+"/tool-calls", agent, c)
				if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["requires_human_approval"] != true {
					t.Fatalf("%s in %s: %d %v, want it to wait for an approver", c["tool"], scope, resp.StatusCode, p)
				}
				d, _ := json.Marshal(p["decision"])
				out[scope+" "+c["tool"].(string)] = string(d)
			}
		}
		return out
	}
	evidence := func(class string) {
		t.Helper()
		for i := range 500 {
			if resp, p := e.api("POST", "/api/v1/evidence", owner, map[string]any{"action_class": class, "label": "sent"}); resp.StatusCode != http.StatusCreated {
				t.Fatalf("evidence %d for %s: %d %v", i, class, resp.StatusCode, p)
			}
			if _, p := e.api("GET", "/api/v1/action-classes/"+class+"/posterior", owner, nil); p["graduation_ready"] == true {
				return
			}
		}
		t.Fatalf("500 messages sent as proposed did not make %s graduation-ready", class)
	}

	before := calls()
	evidence("draft.compose")
	evidence("email.send.external")
	evidence("webhook.post")
	after := calls()
	for k, d := range before {
		if after[k] != d {
			t.Errorf("%s: a ready posterior changed the decision:\n%s\nwas\n%s", k, after[k], d)
		}
	}
	if got := hits.Load(); got != 0 {
		t.Errorf("the webhook was called %d times without an approver", got)
	}
	var ran int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals WHERE tool IN ('email.send', 'webhook.post') AND status <> 'pending_approval'`).Scan(&ran)
	if ran != 0 {
		t.Errorf("%d external calls left the approvers' queue", ran)
	}
	if _, c := e.api("GET", convPath, owner, nil); c["permission_mode"] != "auto" {
		t.Errorf("the conversation's mode is %v", c["permission_mode"])
	}
	if _, c := e.api("GET", nbPath, owner, nil); c["trust_level"] != "autonomous" {
		t.Errorf("the notebook's trust level is %v", c["trust_level"])
	}
	var auto bool
	e.pool.QueryRow(t.Context(), `SELECT auto_approve_high_risk FROM workspaces`).Scan(&auto)
	if auto {
		t.Error("a ready posterior turned auto_approve_high_risk on")
	}
}
