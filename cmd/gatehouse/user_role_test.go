package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestUserRole_GrantListRevokeFromTheCommandLine(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	s := &server{env: map[string]string{"DATABASE_URL": url}}
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")
	s.cli(t, "another long password\n", "user", "create", "--email", "bo@example.com", "--role", "approver")

	if out := s.cli(t, "", "user", "role", "list"); out != "" {
		t.Fatalf("list before any grant: %q", out)
	}
	if out := s.cli(t, "", "user", "role", "grant", "--email", "Ana@Example.com", "--role", "finance-approver"); out != "granted finance-approver to ana@example.com\n" {
		t.Fatalf("grant: %q", out)
	}
	s.cli(t, "", "user", "role", "grant", "--email", "bo@example.com", "--role", "finance-approver")
	s.cli(t, "", "user", "role", "grant", "--email", "ana@example.com", "--role", "audit-approver")
	want := "audit-approver\tana@example.com\nfinance-approver\tana@example.com\nfinance-approver\tbo@example.com\n"
	if out := s.cli(t, "", "user", "role", "list"); out != want {
		t.Fatalf("list: %q, want %q", out, want)
	}

	// Granting a held role, or an unknown member, is an error (not a usage error).
	for _, args := range [][]string{
		{"user", "role", "grant", "--email", "ana@example.com", "--role", "finance-approver"},
		{"user", "role", "grant", "--email", "nobody@example.com", "--role", "finance-approver"},
	} {
		err := run(context.Background(), args, s.getenv, strings.NewReader(""), io.Discard, io.Discard)
		if _, usage := err.(usageError); err == nil || usage || apperr.Code(err) == apperr.EINTERNAL {
			t.Errorf("run(%q) = %v, want a conflict or an invalid email", args, err)
		}
	}

	if out := s.cli(t, "", "user", "role", "revoke", "--email", "ana@example.com", "--role", "finance-approver"); out != "revoked finance-approver from ana@example.com\n" {
		t.Fatalf("revoke: %q", out)
	}
	err := run(context.Background(), []string{"user", "role", "revoke", "--email", "ana@example.com", "--role", "finance-approver"}, s.getenv, strings.NewReader(""), io.Discard, io.Discard)
	if apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("revoking a role not held: %v", err)
	}
	if out := s.cli(t, "", "user", "role", "list"); out != "audit-approver\tana@example.com\nfinance-approver\tbo@example.com\n" {
		t.Fatalf("list after revoke: %q", out)
	}

	// Every change is audited as the system.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT action || ' ' || (data->>'role') || ' ' || (data->>'email') || ' by ' || actor_kind
		FROM audit_events WHERE action LIKE 'approver_role.%' ORDER BY id`)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	wantAudit := []string{"approver_role.granted finance-approver ana@example.com by system", "approver_role.granted finance-approver bo@example.com by system",
		"approver_role.granted audit-approver ana@example.com by system", "approver_role.revoked finance-approver ana@example.com by system"}
	if strings.Join(got, "\n") != strings.Join(wantAudit, "\n") {
		t.Fatalf("audited:\n%s", strings.Join(got, "\n"))
	}
}

func TestUserRole_UsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"user"},
		{"user", "role"},
		{"user", "role", "promote"},
		{"user", "role", "grant", "--email", "a@b.c"},
		{"user", "role", "revoke", "--role", "finance-approver"},
		{"user", "role", "grant", "--email", "not an email", "--role", "finance-approver"},
		{"user", "role", "grant", "--email", "a@b.c", "--role", "Finance"},
		{"user", "role", "grant", "--email", "a@b.c", "--role", "admin"},
		{"user", "role", "list", "--email", "a@b.c"},
	} {
		var errOut strings.Builder
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &errOut)
		if _, ok := err.(usageError); !ok {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}
