package auth_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// tokenFixture is a workspace with a member, another member and an admin,
// each signed in.
type tokenFixture struct {
	svc               *auth.Service
	ws                uuid.UUID
	ana, bo, admin    auth.Principal
	anaEmail, boEmail string
}

func newTokenFixture(t *testing.T) tokenFixture {
	t.Helper()
	pool := dbtest.MustPool(t)
	svc := auth.NewService(pool, cheap)
	ctx := context.Background()
	ws, err := svc.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := tokenFixture{svc: svc, ws: ws, anaEmail: "ana@example.com", boEmail: "bo@example.com"}
	for _, u := range []struct {
		email string
		role  auth.Role
		p     *auth.Principal
	}{{"ana@example.com", auth.RoleMember, &f.ana}, {"bo@example.com", auth.RoleMember, &f.bo}, {"root@example.com", auth.RoleAdmin, &f.admin}} {
		if _, err := svc.CreateUser(ctx, ws, u.email, "a long enough password", u.role); err != nil {
			t.Fatal(err)
		}
		if *u.p, err = svc.Authenticate(ctx, u.email, "a long enough password"); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestIssueToken_ScopeAndExpiryReachThePrincipal(t *testing.T) {
	t.Parallel()
	f := newTokenFixture(t)
	ctx := context.Background()
	secret, tok, err := f.svc.IssueToken(ctx, f.ana, auth.NewToken{Kind: auth.TokenAgent, Name: " reader ", Tools: []string{"records.get", "records.list", "records.get"}, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "reader" || !slices.Equal(tok.Tools, []string{"records.get", "records.list"}) || !tok.ReadOnly || tok.UserID != f.ana.UserID {
		t.Fatalf("token = %+v", tok)
	}
	p, err := f.svc.AuthenticateToken(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if p.TokenScope == nil || !p.TokenScope.ReadOnly || !slices.Equal(p.TokenScope.Tools, []string{"records.get", "records.list"}) || p.TokenID != tok.ID {
		t.Fatalf("principal scope = %+v", p.TokenScope)
	}
	// No tools at all is a scope too: an empty set, not every tool.
	none, _, err := f.svc.IssueToken(ctx, f.ana, auth.NewToken{Kind: auth.TokenAgent, Name: "nothing", Tools: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.svc.AuthenticateToken(ctx, none); err != nil || p.TokenScope == nil || p.TokenScope.Tools == nil || len(p.TokenScope.Tools) != 0 {
		t.Fatalf("empty scope: %+v, %v", p.TokenScope, err)
	}
	// An unscoped token has no scope.
	all, _, err := f.svc.IssueToken(ctx, f.ana, auth.NewToken{Kind: auth.TokenUser, Name: "script"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.svc.AuthenticateToken(ctx, all); err != nil || p.TokenScope != nil {
		t.Fatalf("unscoped: %+v, %v", p.TokenScope, err)
	}
}

func TestAuthenticateToken_ExpiredTokenIsRefused(t *testing.T) {
	t.Parallel()
	f := newTokenFixture(t)
	ctx := context.Background()
	soon := time.Now().Add(1500 * time.Millisecond)
	secret, _, err := f.svc.IssueToken(ctx, f.ana, auth.NewToken{Kind: auth.TokenAgent, Name: "short", ExpiresAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.AuthenticateToken(ctx, secret); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	// Past expiry and past the cache's TTL.
	time.Sleep(time.Until(soon) + auth.TokenCacheTTL + 50*time.Millisecond)
	if _, err := f.svc.AuthenticateToken(ctx, secret); err != auth.ErrBadToken {
		t.Fatalf("after expiry: %v, want ErrBadToken", err)
	}
}

func TestIssueToken_RejectsBadInputNamingEachField(t *testing.T) {
	t.Parallel()
	f := newTokenFixture(t)
	past := time.Now().Add(-time.Hour)
	_, _, err := f.svc.IssueToken(context.Background(), f.ana, auth.NewToken{Kind: "robot", Name: " ", ExpiresAt: &past, Tools: []string{""}})
	var ae *apperr.Error
	if !asAppErr(err, &ae) || ae.Code != apperr.EINVALID {
		t.Fatalf("err = %v", err)
	}
	var fields []string
	for _, fe := range ae.Fields {
		fields = append(fields, fe.Field)
	}
	if !slices.Equal(fields, []string{"kind", "name", "expires_at", "tools"}) {
		t.Fatalf("fields = %v", fields)
	}
	agent := f.ana
	agent.TokenKind, agent.TokenID = auth.TokenAgent, uuid.New()
	if _, _, err := f.svc.IssueToken(context.Background(), agent, auth.NewToken{Kind: auth.TokenAgent, Name: "mine"}); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("an agent issued a token: %v", err)
	}
}

func TestRevokeTokenAs_OwnOrAdminOnly(t *testing.T) {
	t.Parallel()
	f := newTokenFixture(t)
	ctx := context.Background()
	secret, tok, err := f.svc.IssueToken(ctx, f.ana, auth.NewToken{Kind: auth.TokenAgent, Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeTokenAs(ctx, f.bo, tok.ID); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("another member revoked it: %v", err)
	}
	if mine, _ := f.svc.ListTokens(ctx, f.bo, false); len(mine) != 0 {
		t.Fatalf("bo sees %+v", mine)
	}
	if _, err := f.svc.ListTokens(ctx, f.bo, true); apperr.Code(err) != apperr.EFORBIDDEN {
		t.Fatalf("a member listed every token: %v", err)
	}
	all, err := f.svc.ListTokens(ctx, f.admin, true)
	if err != nil || len(all) != 1 || all[0].Email != f.anaEmail || !all[0].Live(time.Now()) {
		t.Fatalf("admin sees %+v, %v", all, err)
	}
	if _, err := f.svc.AuthenticateToken(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeTokenAs(ctx, f.admin, tok.ID); err != nil {
		t.Fatalf("admin revoke: %v", err)
	}
	// At once on this instance, cache or not.
	if _, err := f.svc.AuthenticateToken(ctx, secret); err != auth.ErrBadToken {
		t.Fatalf("revoked token: %v", err)
	}
	if err := f.svc.RevokeTokenAs(ctx, f.ana, tok.ID); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("second revoke: %v", err)
	}
	own, _ := f.svc.ListTokens(ctx, f.ana, false)
	if len(own) != 1 || own[0].RevokedAt == nil || own[0].Live(time.Now()) {
		t.Fatalf("ana sees %+v", own)
	}
}

func TestSetPassword_EndsOlderSessions(t *testing.T) {
	t.Parallel()
	f := newTokenFixture(t)
	ctx := context.Background()
	before := time.Now()
	if _, err := f.svc.SessionPrincipal(ctx, f.ana.UserID, before); err != nil {
		t.Fatalf("no reset yet: %v", err)
	}
	if err := f.svc.SetPassword(ctx, f.ws, f.anaEmail, "short"); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("short password: %v", err)
	}
	if err := f.svc.SetPassword(ctx, f.ws, "nobody@example.com", "another long password"); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("unknown user: %v", err)
	}
	if err := f.svc.SetPassword(ctx, f.ws, f.anaEmail, "another long password"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SessionPrincipal(ctx, f.ana.UserID, before); apperr.Code(err) != apperr.EUNAUTH {
		t.Fatalf("old session: %v", err)
	}
	if _, err := f.svc.Authenticate(ctx, f.anaEmail, "a long enough password"); err != auth.ErrBadCredentials {
		t.Fatalf("old password: %v", err)
	}
	if _, err := f.svc.Authenticate(ctx, f.anaEmail, "another long password"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if _, err := f.svc.SessionPrincipal(ctx, f.ana.UserID, time.Now()); err != nil {
		t.Fatalf("new session: %v", err)
	}
	if _, err := f.svc.SessionPrincipal(ctx, f.bo.UserID, before); err != nil {
		t.Fatalf("another user's session: %v", err)
	}
}
