package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Two invariants of the Trust Graduation Protocol that hold by
// construction (the decision reads no evidence), tested through the
// server (issue 31 item 8):
//   - evidence for one action class never changes another class's
//     decision: a thousand approvals of draft.compose do not let an
//     external email run, and a thousand rejections of it do not stop an
//     automatic records.put;
//   - a graduation-ready posterior never lets an external-effect call run
//     without the owner's explicit change: email.send.external itself
//     graduation-ready (and high risk auto-approved, so only the mode
//     holds it), the external email still waits for the owner, and the
//     conversation's mode is what the owner set.
func TestTrustInvariants_EvidenceNeverDecidesACall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	_, held := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "mail"})
	approve := held["id"].(string)
	_, free := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "records"})
	auto := free["id"].(string)
	if resp, c := e.api("PATCH", "/api/v1/conversations/"+auto, owner, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("auto mode: %d %v", resp.StatusCode, c)
	}
	// High-risk calls need no approver here, so the owner's mode is all
	// that holds an external email back.
	if _, err := e.pool.Exec(t.Context(), `UPDATE workspaces SET auto_approve_high_risk = true`); err != nil {
		t.Fatal(err)
	}
	n := 0
	email := func() (int, string, map[string]any) {
		n++
		resp, p := e.api("POST", "/api/v1/conversations/"+approve+"/tool-calls", agent, map[string]any{"tool": "email.send",
			"arguments":       map[string]any{"to": "buyer@elsewhere.example", "subject": "Offer", "body": "Our offer stands."},
			"idempotency_key": fmt.Sprintf("invariant-email-%04d", n), "rationale": "send the buyer the offer the owner wrote"})
		d, _ := json.Marshal(p["decision"])
		return resp.StatusCode, string(d), p
	}
	put := func() (int, string, map[string]any) {
		n++
		resp, p := e.api("POST", "/api/v1/conversations/"+auto+"/tool-calls", agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "c", "key": fmt.Sprintf("k%d", n), "value": map[string]any{}}, "rationale": "store the owner's note"})
		d, _ := json.Marshal(p["decision"])
		return resp.StatusCode, string(d), p
	}
	evidence := func(class, label string, count int) {
		t.Helper()
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight)
			SELECT id, $1, $2, 'receipt', 0.85, 1, CASE WHEN $2 = 'approved' THEN 0.85 ELSE -0.85 END FROM workspaces, generate_series(1, $3::int)`, class, label, count); err != nil {
			t.Fatal(err)
		}
	}
	ready := func(class string) bool {
		_, p := e.api("GET", "/api/v1/action-classes/"+class+"/posterior", owner, nil)
		return p["graduation_ready"] == true
	}

	emailStatus, emailDecision, first := email()
	putStatus, putDecision, _ := put()
	waits := first["status"] // the owner's confirmation: the mode is approve
	if emailStatus != http.StatusAccepted || waits != "pending" || putStatus != http.StatusOK {
		t.Fatalf("before any evidence: email %d %v, put %d", emailStatus, first, putStatus)
	}

	// Another class's evidence, both ways.
	evidence("draft.compose", "approved", 1000)
	if !ready("draft.compose") {
		t.Fatal("a thousand approvals did not make draft.compose ready")
	}
	if s, d, p := email(); s != emailStatus || d != emailDecision || p["status"] != waits {
		t.Errorf("draft.compose's approvals changed the external email's decision: %d %s %v, want %d %s", s, d, p["status"], emailStatus, emailDecision)
	}
	evidence("draft.compose", "rejected", 3000)
	if s, d, p := put(); s != putStatus || d != putDecision || p["status"] != "applied" {
		t.Errorf("draft.compose's rejections changed records.put's decision: %d %s %v, want %d %s", s, d, p["status"], putStatus, putDecision)
	}

	// The class itself graduation-ready: the hint recommends, nothing runs.
	evidence("email.send.external", "approved", 1000)
	if !ready("email.send.external") {
		t.Fatal("a thousand approvals did not make email.send.external ready")
	}
	if s, d, p := email(); s != emailStatus || d != emailDecision || p["status"] != waits {
		t.Errorf("a ready posterior changed the external email's decision: %d %s %v, want %d %s", s, d, p["status"], emailStatus, emailDecision)
	}
	if _, c := e.api("GET", "/api/v1/conversations/"+approve, owner, nil); c["permission_mode"] != "approve" {
		t.Errorf("the conversation's mode is %v: only its owner changes it", c["permission_mode"])
	}
	var ran int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals WHERE tool = 'email.send' AND status NOT IN ('pending', 'pending_approval')`).Scan(&ran)
	if ran != 0 {
		t.Errorf("%d external emails ran without the owner", ran)
	}
}
