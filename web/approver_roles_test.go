package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestApproverRoles_AdminGrantsAndRevokesThemOnTheAdminPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("root@example.com", auth.RoleAdmin)
	boss := e.user("boss@example.com", auth.RoleApprover)
	ana := e.user("ana@example.com", auth.RoleMember)
	audited := func(action string) []string {
		t.Helper()
		rows, err := e.pool.Query(t.Context(), `SELECT a.data->>'role' || ' ' || (a.data->>'email') || ' by ' || u.email || ' on ' || a.subject_type || ':' || s.email
			FROM audit_events a JOIN users u ON u.id = a.actor_user_id JOIN users s ON s.id::text = a.subject_id
			WHERE a.action = $1 ORDER BY a.id`, action)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}

	if resp, body := ana.get("/admin/approvals"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "holders of an approver role") {
		t.Fatalf("a member without a role on the queue: %d", resp.StatusCode)
	}
	resp, body := admin.get("/admin")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="grant-role"`) {
		t.Fatalf("admin page: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = admin.postForm("/admin/approver-roles", url.Values{"email": {"Ana@Example.com"}, "role": {"finance-approver"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin" {
		t.Fatalf("grant: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := audited("approver_role.granted"); len(got) != 1 || got[0] != "finance-approver ana@example.com by root@example.com on user:ana@example.com" {
		t.Fatalf("audited %v", got)
	}
	_, body = admin.get("/admin")
	if !strings.Contains(body, "finance-approver") || strings.Count(body, `data-testid="revoke-role"`) != 1 ||
		!strings.Contains(body, `aria-label="Revoke finance-approver from ana@example.com"`) {
		t.Fatalf("the page does not show the role with its revoke button:\n%s", body)
	}

	// Bad input grants nothing and re-renders the form as typed, the
	// message next to its field.
	resp, body = admin.postForm("/admin/approver-roles", url.Values{"email": {"ana@example.com"}, "role": {"Finance Approver"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="role-error"`) ||
		!strings.Contains(body, "lowercase letters, digits or hyphens") || !strings.Contains(body, `value="Finance Approver"`) ||
		!strings.Contains(body, `value="ana@example.com" autocomplete="off" data-testid="grant-email"`) {
		t.Fatalf("bad role name: %d\n%s", resp.StatusCode, body)
	}
	resp, body = admin.postForm("/admin/approver-roles", url.Values{"email": {"nobody@example.com"}, "role": {"admin"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="email-error"`) ||
		!strings.Contains(body, "no member of this workspace has this email") || !strings.Contains(body, `data-testid="role-error"`) ||
		!strings.Contains(body, "admin is a workspace role") {
		t.Fatalf("an unknown email and a workspace role: %d\n%s", resp.StatusCode, body)
	}
	resp, body = admin.postForm("/admin/approver-roles", url.Values{"email": {"ana@example.com"}, "role": {"finance-approver"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "holds the role finance-approver already") {
		t.Fatalf("granting a held role: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := admin.postForm("/admin/approver-roles", url.Values{"email": {"ana@example.com"}, "role": {"audit-approver"}, "_csrf": {"forged"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged CSRF token: %d", resp.StatusCode)
	}

	// Approvers see the roles, read-only.
	resp, body = boss.get("/admin")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "finance-approver") || strings.Contains(body, `data-testid="grant-role"`) ||
		strings.Contains(body, `data-testid="revoke-role"`) {
		t.Fatalf("approver's admin page: %d\n%s", resp.StatusCode, body)
	}
	for _, path := range []string{"/admin/approver-roles", "/admin/approver-roles/revoke"} {
		if resp, _ := boss.postForm(path, url.Values{"email": {"ana@example.com"}, "role": {"finance-approver"}}); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("an approver posts %s: %d", path, resp.StatusCode)
		}
	}
	if got := audited("approver_role.granted"); len(got) != 1 {
		t.Fatalf("refused grants were audited: %v", got)
	}

	// A member holding only finance-approver reaches the queue, not the
	// rest of the admin pages.
	if _, home := ana.get("/"); !strings.Contains(home, `href="/admin/approvals"`) || strings.Contains(home, `href="/admin"`) {
		t.Fatal("the header of a role holder should link to the queue and not to Admin")
	}
	for _, path := range []string{"/admin/settings", "/admin/outbox", "/admin"} {
		if resp, _ := ana.get(path); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a role holder on %s: %d", path, resp.StatusCode)
		}
	}
	if resp, body := ana.get("/admin/approvals"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a finance-approver on the queue: %d\n%s", resp.StatusCode, body)
	}

	// Revoke with the button's form: the queue closes to her again.
	admin.get("/admin")
	resp, _ = admin.postForm("/admin/approver-roles/revoke", url.Values{"email": {"ana@example.com"}, "role": {"finance-approver"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin" {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if got := audited("approver_role.revoked"); len(got) != 1 || got[0] != "finance-approver ana@example.com by root@example.com on user:ana@example.com" {
		t.Fatalf("audited %v", got)
	}
	if resp, _ := ana.get("/admin/approvals"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("after revoke, the queue: %d", resp.StatusCode)
	}
	resp, body = admin.postForm("/admin/approver-roles/revoke", url.Values{"email": {"ana@example.com"}, "role": {"finance-approver"}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "does not hold the role finance-approver") {
		t.Fatalf("revoking a role not held: %d\n%s", resp.StatusCode, body)
	}
}
