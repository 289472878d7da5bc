package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// ADR-036's gate as an opt-in: confirm: true stands in for the approver of
// a high-risk call only where the workspace says so, and only for the risk
// gate.
func TestConfirmHighRisk_AnOptInThatWaivesTheRiskGateOnly(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	admin := e.user("root@example.com", auth.RoleAdmin)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	id := conv["id"].(string)
	if resp, _ := e.api("PATCH", "/api/v1/conversations/"+id, user, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("auto mode: %d", resp.StatusCode)
	}
	n := 0
	send := func(confirm bool) (*http.Response, map[string]any) {
		n++
		body := map[string]any{"tool": "t.send", "arguments": map[string]any{"to": "ana@example.com"}, "rationale": "the client asked for it",
			"idempotency_key": "send-confirm-" + strings.Repeat("x", n+4)}
		if confirm {
			body["confirm"] = true
		}
		return e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, body)
	}

	// Off (the default): confirm grants nothing, and the answer says an
	// admin may allow it.
	resp, p := send(true)
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || !strings.Contains(p["confirm_ignored"].(string), "confirm_runs_high_risk") {
		t.Fatalf("off: %d %v", resp.StatusCode, p)
	}

	admin.get("/admin/settings")
	resp, page := admin.postForm("/admin/settings", url.Values{"confirm_runs_high_risk": {"on"}, "rationale_min_length": {"10"}, "rationale_mode": {"strict"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("opt in: %d\n%s", resp.StatusCode, page)
	}
	if _, page := admin.get("/admin/settings"); !strings.Contains(page, `name="confirm_runs_high_risk" checked`) {
		t.Fatalf("the settings page does not show the opt-in")
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed' AND data->>'setting' = 'confirm_runs_high_risk'`); n != 1 {
		t.Fatalf("%d audit rows for the opt-in", n)
	}

	// On: with confirm the call runs, its risk layer and audit row say why;
	// without it the call still waits for an approver.
	resp, p = send(true)
	if resp.StatusCode != http.StatusOK || p["status"] != "applied" || p["confirm_ignored"] != nil {
		t.Fatalf("on, confirmed: %d %v", resp.StatusCode, p)
	}
	var risk string
	for _, l := range p["decision"].(map[string]any)["layers"].([]any) {
		if l := l.(map[string]any); l["layer"] == "risk" {
			risk = l["state"].(string) + ": " + l["reason"].(string)
		}
	}
	if !strings.HasPrefix(risk, "allowed: The caller confirmed this high-risk call") {
		t.Fatalf("the risk layer: %q", risk)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action IN ('proposal.created', 'proposal.applied') AND subject_id = $1 AND data->>'confirmed_high_risk' = 'true'`, p["proposal_id"]); n != 1 {
		t.Fatalf("the audit row does not say confirmed_high_risk")
	}
	if resp, p := send(false); resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" {
		t.Fatalf("on, not confirmed: %d %v", resp.StatusCode, p)
	}
	// Only the risk gate: a deletion in a conversation still waits for its
	// owner, confirm or not.
	resp, p = e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, map[string]any{"tool": "records.delete",
		"arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "clean up the test record", "confirm": true, "idempotency_key": "delete-confirm-000001"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" {
		t.Fatalf("a deletion with confirm: %d %v", resp.StatusCode, p)
	}
}
