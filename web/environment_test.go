package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestEnvironment_OwnerSetsItAndStagingOnlyHoldsOnlyInStaging(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	owner := e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	approver := e.token("boss@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	id := conv["id"].(string)
	if conv["environment"] != nil {
		t.Fatalf("a new conversation has an environment: %v", conv)
	}

	// Bad input changes nothing and names the field; an agent may not set it.
	if resp, p := e.api("PATCH", "/api/v1/conversations/"+id, user, map[string]any{"environment": "moon"}); resp.StatusCode != http.StatusUnprocessableEntity ||
		p["errors"].([]any)[0].(map[string]any)["field"] != "environment" {
		t.Fatalf("an unknown environment: %d %v", resp.StatusCode, p)
	}
	if resp, _ := e.api("PATCH", "/api/v1/conversations/"+id, agent, map[string]any{"environment": "staging"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent set the environment: %d", resp.StatusCode)
	}
	// The header's picker.
	owner.get("/conversations/" + id)
	if resp, frag := owner.postForm("/conversations/"+id+"/environment", url.Values{"environment": {"production"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("picker: %d\n%s", resp.StatusCode, frag)
	}
	if resp, frag := owner.postForm("/conversations/"+id+"/environment", url.Values{"environment": {"moon"}}); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(frag, `role="alert"`) {
		t.Fatalf("picker, bad value: %d\n%s", resp.StatusCode, frag)
	}
	if _, page := owner.get("/conversations/" + id); !strings.Contains(page, `<option value="production" selected>`) {
		t.Fatalf("the page does not show the environment")
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'conversation.environment_changed' AND data->>'new' = 'production'`); n != 1 {
		t.Fatalf("%d audit rows", n)
	}

	// An approver's staging_only in production is refused now, saying why,
	// and the packet waits on; in staging it holds and the call runs.
	_, p := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "the client asked for it", "idempotency_key": "send-ana-env-000001"})
	packet := p["approval_id"].(string)
	approve := map[string]any{"constraints": []any{map[string]any{"kind": "staging_only"}}}
	status, out := adminJSON(t, e, "POST", "/admin/approvals/"+packet+"/approve", approver, approve)
	if status != http.StatusUnprocessableEntity || !strings.Contains(out["detail"].(string), "staging_only can never hold here: this conversation or notebook is in production") ||
		!strings.Contains(out["errors"].([]any)[0].(map[string]any)["field"].(string), "constraints.0") {
		t.Fatalf("staging_only in production: %d %v", status, out)
	}
	if n := e.count(`SELECT count(*) FROM approval_votes WHERE approval_id = $1`, packet); n != 0 {
		t.Fatalf("the refused approval left %d votes", n)
	}
	if resp, c := e.api("PATCH", "/api/v1/conversations/"+id, user, map[string]any{"environment": "staging"}); resp.StatusCode != http.StatusOK || c["environment"] != "staging" {
		t.Fatalf("set staging: %d %v", resp.StatusCode, c)
	}
	status, out = adminJSON(t, e, "POST", "/admin/approvals/"+packet+"/approve", approver, approve)
	if status != http.StatusOK || out["proposal"].(map[string]any)["status"] != "applied" {
		t.Fatalf("staging_only in staging: %d %v", status, out)
	}

	// A notebook too; clearing it makes staging_only impossible again.
	_, nb := e.api("POST", "/api/v1/notebooks", user, map[string]any{"title": "n"})
	if resp, n := e.api("PATCH", "/api/v1/notebooks/"+nb["id"].(string), user, map[string]any{"environment": "test"}); resp.StatusCode != http.StatusOK || n["environment"] != "test" {
		t.Fatalf("notebook: %d %v", resp.StatusCode, n)
	}
	if resp, n := e.api("PATCH", "/api/v1/notebooks/"+nb["id"].(string), user, map[string]any{"environment": ""}); resp.StatusCode != http.StatusOK || n["environment"] != nil {
		t.Fatalf("notebook cleared: %d %v", resp.StatusCode, n)
	}
}
