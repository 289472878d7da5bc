package auth_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// cheap keeps argon2 fast in tests; the format carries the parameters, so
// verification is the same code path as with the defaults.
var cheap = auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}

func TestPassword_RoundTripAndTamper(t *testing.T) {
	h, err := auth.HashPassword("correct horse battery", auth.DefaultPasswordParams)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q is not argon2id with the default parameters", h)
	}
	if !auth.CheckPassword("correct horse battery", h) {
		t.Fatal("right password rejected")
	}
	for _, bad := range []string{"correct horse batterY", "", "correct horse battery "} {
		if auth.CheckPassword(bad, h) {
			t.Errorf("wrong password %q accepted", bad)
		}
	}
	if auth.CheckPassword("correct horse battery", strings.Replace(h, "argon2id", "argon2i", 1)) {
		t.Error("hash with another algorithm accepted")
	}
	h2, _ := auth.HashPassword("correct horse battery", auth.DefaultPasswordParams)
	if h == h2 {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
}

func newService(t *testing.T) (*auth.Service, context.Context) {
	t.Helper()
	svc := auth.NewService(dbtest.MustPool(t), cheap)
	return svc, context.Background()
}

func TestAuthenticate_RightAndWrongCredentials(t *testing.T) {
	t.Parallel()
	svc, ctx := newService(t)
	ws, err := svc.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateUser(ctx, ws, "Ana@Example.com", "a long enough password", auth.RoleApprover); err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, "  ana@example.COM ", "a long enough password")
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	if p.Email != "ana@example.com" || p.Role != auth.RoleApprover || p.WorkspaceID != ws || !p.CanApprove() || p.IsAdmin() {
		t.Fatalf("principal = %+v", p)
	}
	for _, c := range []struct{ email, pw string }{{"ana@example.com", "wrong password!!"}, {"nobody@example.com", "a long enough password"}} {
		if _, err := svc.Authenticate(ctx, c.email, c.pw); err != auth.ErrBadCredentials {
			t.Errorf("Authenticate(%q) err = %v, want ErrBadCredentials", c.email, err)
		}
	}
}

func TestCreateUser_RejectsBadInput(t *testing.T) {
	t.Parallel()
	svc, ctx := newService(t)
	ws, _ := svc.EnsureDefaultWorkspace(ctx)
	cases := []struct {
		name, email, pw string
		role            auth.Role
		code, field     string
	}{
		{"short password", "a@example.com", "short", auth.RoleMember, apperr.EINVALID, "password"},
		{"bad email", "not an email", "a long enough password", auth.RoleMember, apperr.EINVALID, "email"},
		{"bad role", "b@example.com", "a long enough password", "owner", apperr.EINVALID, "role"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := svc.CreateUser(ctx, ws, c.email, c.pw, c.role)
			var ae *apperr.Error
			if !asAppErr(err, &ae) || ae.Code != c.code || len(ae.Fields) == 0 || ae.Fields[0].Field != c.field {
				t.Fatalf("err = %#v, want %s on %s", err, c.code, c.field)
			}
		})
	}
	if _, err := svc.CreateUser(ctx, ws, "dup@example.com", "a long enough password", auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateUser(ctx, ws, "DUP@example.com", "a long enough password", auth.RoleMember); apperr.Code(err) != apperr.ECONFLICT {
		t.Fatalf("duplicate email err = %v, want conflict", err)
	}
}

func TestTokens_AgentAndUserKindsAndRevocation(t *testing.T) {
	t.Parallel()
	svc, ctx := newService(t)
	ws, _ := svc.EnsureDefaultWorkspace(ctx)
	if _, err := svc.CreateUser(ctx, ws, "owner@example.com", "a long enough password", auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	agentTok, err := svc.CreateToken(ctx, "owner@example.com", auth.TokenAgent, "research-bot")
	if err != nil {
		t.Fatal(err)
	}
	userTok, err := svc.CreateToken(ctx, "owner@example.com", auth.TokenUser, "my script")
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.AuthenticateToken(ctx, agentTok)
	if err != nil || !a.IsAgent() || a.TokenName != "research-bot" || a.Email != "owner@example.com" {
		t.Fatalf("agent token principal = %+v, %v", a, err)
	}
	u, err := svc.AuthenticateToken(ctx, userTok)
	if err != nil || u.IsAgent() || u.TokenKind != auth.TokenUser {
		t.Fatalf("user token principal = %+v, %v", u, err)
	}
	if _, err := svc.AuthenticateToken(ctx, agentTok+"x"); err != auth.ErrBadToken {
		t.Fatalf("tampered token err = %v", err)
	}
	if err := svc.RevokeToken(ctx, a.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AuthenticateToken(ctx, agentTok); err != auth.ErrBadToken {
		t.Fatalf("revoked token err = %v, want ErrBadToken", err)
	}
	if _, err := svc.CreateToken(ctx, "nobody@example.com", auth.TokenUser, "x"); apperr.Code(err) != apperr.ENOTFOUND {
		t.Fatalf("token for unknown user err = %v", err)
	}
	if _, err := svc.CreateToken(ctx, "owner@example.com", "robot", "x"); apperr.Code(err) != apperr.EINVALID {
		t.Fatalf("bad kind err = %v", err)
	}
}

func TestEnsureAdmin_ConcurrentFirstStartsCreateOneAdmin(t *testing.T) {
	t.Parallel()
	svc, ctx := newService(t)
	ws, _ := svc.EnsureDefaultWorkspace(ctx)
	var wg sync.WaitGroup
	passwords := make([]string, 5)
	errs := make([]error, 5)
	for i := range passwords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			passwords[i], errs[i] = svc.EnsureAdmin(ctx, ws, "admin@example.com", "")
		}()
	}
	wg.Wait()
	created := 0
	for i, pw := range passwords {
		if errs[i] != nil {
			t.Fatalf("EnsureAdmin: %v", errs[i])
		}
		if pw != "" {
			created++
			if len(pw) < 20 {
				t.Errorf("generated password %q is too short", pw)
			}
			if _, err := svc.Authenticate(ctx, "admin@example.com", pw); err != nil {
				t.Errorf("generated password does not sign in: %v", err)
			}
		}
	}
	if created != 1 {
		t.Fatalf("%d admins created, want 1", created)
	}
}

func asAppErr(err error, target **apperr.Error) bool {
	e, ok := err.(*apperr.Error)
	if ok {
		*target = e
	}
	return ok
}
