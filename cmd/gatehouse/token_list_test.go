package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestTokenList_ShowsEveryTokenOrOneMembersWithoutSecrets(t *testing.T) {
	t.Parallel()
	s := &server{env: map[string]string{"DATABASE_URL": dbtest.MustURL(t)}}
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")
	s.cli(t, "a long enough password\n", "user", "create", "--email", "bo@example.com")
	anaTok := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--name", "reader",
		"--tools", "records.get,records.search", "--read-only", "--expires", "2999-12-31"))
	s.cli(t, "", "token", "create", "--email", "bo@example.com", "--kind", "user", "--name", "script")

	out := s.cli(t, "", "token", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "LAST USED") {
		t.Fatalf("list:\n%s", out)
	}
	if strings.Contains(out, anaTok) || strings.Contains(out, "gh_") {
		t.Fatal("a secret is listed")
	}
	// Newest first.
	if !strings.Contains(lines[1], "script") || !strings.Contains(lines[1], "bo@example.com") || !strings.Contains(lines[1], " user ") {
		t.Errorf("first row: %q", lines[1])
	}
	if !strings.Contains(lines[2], "reader") || !strings.Contains(lines[2], "3000-01-01T00:00:00Z") || // through 2999-12-31
		!strings.Contains(lines[2], "read-only:records.get,records.search") {
		t.Errorf("second row: %q", lines[2])
	}
	id := strings.Fields(lines[2])[0]

	mine := s.cli(t, "", "token", "list", "--email", "Ana@Example.com")
	if rows := strings.Split(strings.TrimSpace(mine), "\n"); len(rows) != 2 || !strings.HasPrefix(rows[1], id) {
		t.Fatalf("ana's tokens:\n%s", mine)
	}
	s.cli(t, "", "token", "revoke", "--id", id)
	mine = s.cli(t, "", "token", "list", "--email", "ana@example.com")
	if row := strings.Split(strings.TrimSpace(mine), "\n")[1]; strings.Fields(row)[7] == "-" {
		t.Fatalf("the revocation is not listed: %q", row)
	}
	if err := run(context.Background(), []string{"token", "list", "--email", "nobody@example.com"}, s.getenv, strings.NewReader(""), io.Discard, io.Discard); err == nil {
		t.Fatal("an unknown member's tokens were listed")
	}
	if err := run(context.Background(), []string{"token", "create", "--email", "ana@example.com", "--name", "x", "--expires", "soon"}, s.getenv, strings.NewReader(""), io.Discard, io.Discard); err == nil {
		t.Fatal("a token with a bad expiry was created")
	} else if _, usage := err.(usageError); !usage {
		t.Fatalf("bad expiry: %v, want a usage error", err)
	}
}

func TestUserList_ShowsEveryMemberTheirRoleAndApproverRoles(t *testing.T) {
	t.Parallel()
	s := &server{env: map[string]string{"DATABASE_URL": dbtest.MustURL(t)}}
	s.cli(t, "a long enough password\n", "user", "create", "--email", "bo@example.com", "--role", "approver")
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")
	s.cli(t, "", "user", "role", "grant", "--email", "ana@example.com", "--role", "finance-approver")
	s.cli(t, "", "user", "role", "grant", "--email", "ana@example.com", "--role", "audit-approver")
	out := s.cli(t, "", "user", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{{"EMAIL", "ROLE", "APPROVER", "ROLES"}, {"ana@example.com", "member", "audit-approver,finance-approver"}, {"bo@example.com", "approver", "-"}}
	if len(lines) != len(want) {
		t.Fatalf("list:\n%s", out)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
}

func TestUserResetPassword_NewPasswordAndOldSessionsEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.MustURL(t)})
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")
	s.cli(t, "a long enough password\n", "user", "create", "--email", "bo@example.com")
	ana := signIn(t, s.URL, "ana@example.com", "a long enough password")
	bo := signIn(t, s.URL, "bo@example.com", "a long enough password")
	token := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--name", "bot"))

	err := run(context.Background(), []string{"user", "reset-password", "--email", "ana@example.com"}, s.getenv, strings.NewReader("short\n"), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("a short password was set")
	}
	if out := s.cli(t, "another long password\n", "user", "reset-password", "--email", "Ana@Example.com"); !strings.HasPrefix(out, "reset the password of ana@example.com") {
		t.Fatalf("output %q", out)
	}
	noFollow := func(c *http.Client) *http.Client {
		return &http.Client{Jar: c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	resp, err := noFollow(ana).Get(s.URL + "/conversations")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("ana's old session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = noFollow(bo).Get(s.URL + "/conversations")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bo's session: %d", resp.StatusCode)
	}
	// Tokens stay; the new password signs in.
	if status, _ := getJSON(t, s.URL+"/api/v1/me", token); status != http.StatusOK {
		t.Fatalf("ana's token: %d", status)
	}
	signIn(t, s.URL, "ana@example.com", "another long password")
}
