package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

var (
	tokenSecret = regexp.MustCompile(`data-testid="token-secret">(gh_[A-Za-z0-9_-]+)<`)
	tokenRowID  = regexp.MustCompile(`data-token-id="([0-9a-f-]{36})"`)
)

func TestTokensPage_UserCreatesUsesAndRevokesAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	ana.get("/tokens")
	resp, body := ana.postForm("/tokens", url.Values{"name": {"my agent"}, "kind": {"agent"}, "tools": {"records.search", "records.get"}, "read_only": {"on"},
		"expires_on": {time.Now().AddDate(0, 0, 7).Format(time.DateOnly)}})
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	m := tokenSecret.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the new token is not shown:\n%s", body)
	}
	secret := m[1]
	if !strings.Contains(body, "tools: records.get, records.search, read-only") {
		t.Errorf("the scope is not shown:\n%s", body)
	}
	// It works, with its scope, and is never shown again.
	if resp, me := e.api("GET", "/api/v1/me", secret, nil); resp.StatusCode != http.StatusOK || me["email"] != "ana@example.com" {
		t.Fatalf("the new token: %d %v", resp.StatusCode, me)
	}
	_, page := ana.get("/tokens")
	if strings.Contains(page, secret) || strings.Contains(page, "token-secret") {
		t.Fatal("the secret is shown again")
	}
	var stored int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM api_tokens WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND scope_read_only AND expires_at IS NOT NULL", secret).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("stored hashed with its scope: %d, %v", stored, err)
	}
	// Another member cannot revoke it; its owner can.
	id := tokenRowID.FindStringSubmatch(page)[1]
	bo := e.user("bo@example.com", auth.RoleMember)
	bo.get("/tokens")
	if resp, _ := bo.postForm("/tokens/"+id+"/revoke", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another member's revoke: %d", resp.StatusCode)
	}
	if resp, body := ana.postForm("/tokens/"+id+"/revoke", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tokens" {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.api("GET", "/api/v1/me", secret, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", resp.StatusCode)
	}
	_, page = ana.get("/tokens")
	if !strings.Contains(page, ">revoked ") || strings.Contains(page, `data-testid="revoke-token"`) {
		t.Errorf("the page does not show the revocation:\n%s", page)
	}
	var actions []string
	rows, _ := e.pool.Query(t.Context(), "SELECT action || ':' || actor_kind FROM audit_events WHERE subject_id = $1 ORDER BY id", id)
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		actions = append(actions, a)
	}
	if strings.Join(actions, " ") != "token.created:user token.revoked:user" {
		t.Errorf("audit = %v", actions)
	}
}

func TestTokensPage_BadInputIs422WithTheMessageNextToTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	ana.get("/tokens")
	for name, c := range map[string]struct {
		form  url.Values
		field string
	}{
		"no name":      {url.Values{"name": {" "}, "kind": {"agent"}}, "name-error"},
		"bad kind":     {url.Values{"name": {"x"}, "kind": {"robot"}}, "kind-error"},
		"past expiry":  {url.Values{"name": {"x"}, "kind": {"agent"}, "expires_on": {"2001-01-01"}}, "expires-error"},
		"not a date":   {url.Values{"name": {"x"}, "kind": {"agent"}, "expires_on": {"soon"}}, "expires-error"},
		"unknown tool": {url.Values{"name": {"x"}, "kind": {"agent"}, "tools": {"no.such.tool"}}, "tools-error"},
	} {
		resp, body := ana.postForm("/tokens", c.form)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="`+c.field+`"`) {
			t.Errorf("%s: %d, no %s", name, resp.StatusCode, c.field)
		}
		if c.form.Get("name") == "x" && !strings.Contains(body, `value="x"`) {
			t.Errorf("%s: the form is not as typed", name)
		}
	}
	var n int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM api_tokens").Scan(&n); err != nil || n != 0 {
		t.Fatalf("tokens = %d, %v", n, err)
	}
	// Without the CSRF token, nothing is created.
	resp, _ := ana.postForm("/tokens", url.Values{"_csrf": {"wrong"}, "name": {"x"}, "kind": {"agent"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("without CSRF: %d", resp.StatusCode)
	}
}

func TestTokensPage_AdminSeesAndRevokesEveryToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := e.user("root@example.com", auth.RoleAdmin)
	ana := e.user("ana@example.com", auth.RoleMember)
	secret := e.token("ana@example.com", auth.TokenAgent)
	_, page := ana.get("/tokens")
	if strings.Contains(page, `data-testid="all-tokens"`) {
		t.Fatal("a member sees every token")
	}
	_, page = root.get("/tokens")
	if !strings.Contains(page, `data-testid="all-tokens"`) || !strings.Contains(page, "ana@example.com") {
		t.Fatalf("the admin does not see ana's token:\n%s", page)
	}
	id := tokenRowID.FindStringSubmatch(page)[1]
	if resp, _ := root.postForm("/tokens/"+id+"/revoke", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin revoke: %d", resp.StatusCode)
	}
	if resp, _ := e.api("GET", "/api/v1/me", secret, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked by the admin: %d", resp.StatusCode)
	}
}
