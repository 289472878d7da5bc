package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestSettings_AdminsChangeThemAndEveryChangeIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("root@example.com", auth.RoleAdmin)
	approver := e.user("boss@example.com", auth.RoleApprover)

	resp, body := admin.get("/admin/settings")
	if resp.StatusCode != http.StatusOK || strings.Contains(body, `data-testid="auto-approve-high-risk" checked`) || !strings.Contains(body, "Off by default") {
		t.Fatalf("settings page: %d", resp.StatusCode)
	}
	if resp, _ := approver.get("/admin/settings"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an approver on settings: %d", resp.StatusCode)
	}
	approver.get("/admin")
	if resp, _ := approver.postForm("/admin/settings", url.Values{"auto_approve_high_risk": {"on"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an approver saves settings: %d", resp.StatusCode)
	}

	// Bad input saves nothing and names the field.
	resp, body = admin.postForm("/admin/settings", url.Values{"auto_approve_high_risk": {"on"}, "internal_domains": {"example.com, not a domain!"},
		"rationale_min_length": {"5"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Nothing was saved") || !strings.Contains(body, "is not a domain") ||
		!strings.Contains(body, "from 10 to 500") {
		t.Fatalf("bad domains: %d\n%s", resp.StatusCode, body)
	}
	var on bool
	e.pool.QueryRow(t.Context(), "SELECT auto_approve_high_risk FROM workspaces").Scan(&on)
	if on {
		t.Fatal("a refused form changed a setting")
	}

	admin.get("/admin/settings")
	resp, _ = admin.postForm("/admin/settings", url.Values{"auto_approve_high_risk": {"on"}, "internal_domains": {"@Example.com\nexample.com corp.example.org"},
		"webhook_allowlist": {"hooks.example.com"}, "rationale_min_length": {"40"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/settings?saved=1" {
		t.Fatalf("save: %d", resp.StatusCode)
	}
	var internal []string
	e.pool.QueryRow(t.Context(), "SELECT auto_approve_high_risk, internal_domains FROM workspaces").Scan(&on, &internal)
	if !on || strings.Join(internal, ",") != "corp.example.org,example.com" {
		t.Fatalf("stored %v %v", on, internal)
	}
	rows, _ := e.pool.Query(t.Context(), "SELECT data->>'setting' FROM audit_events WHERE action = 'workspace.setting_changed' ORDER BY id")
	var changed []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		changed = append(changed, s)
	}
	if strings.Join(changed, ",") != "auto_approve_high_risk,internal_domains,webhook_allowlist,rationale_min_length" {
		t.Fatalf("audited %v", changed)
	}
	// The rationale setting holds for agents' calls.
	e.token("root@example.com", auth.TokenAgent)
	agent := e.token("root@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.search",
		"arguments": map[string]any{"query": "x"}, "rationale": "a short reason only"})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p["detail"].(string), "at least 40 characters") {
		t.Fatalf("a short rationale: %d %v", resp.StatusCode, p)
	}
	if _, body := admin.get("/admin/settings?saved=1"); !strings.Contains(body, `data-testid="saved"`) || !strings.Contains(body, "checked") {
		t.Fatal("the page does not show what was saved")
	}
}
