package auth_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

const rightPassword = "a long enough password"

// newSignInService is a service with the users of the sign-in tests.
func newSignInService(t *testing.T, emails ...string) (*auth.Service, context.Context) {
	t.Helper()
	svc, ctx := newService(t)
	ws, err := svc.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, email := range emails {
		if _, err := svc.CreateUser(ctx, ws, email, rightPassword, auth.RoleMember); err != nil {
			t.Fatal(err)
		}
	}
	return svc, ctx
}

// mustFail signs in with a wrong password and wants the usual refusal.
func mustFail(t *testing.T, ctx context.Context, svc *auth.Service, email, address string) {
	t.Helper()
	if _, err := svc.SignIn(ctx, email, "a wrong guess", address); err != auth.ErrBadCredentials {
		t.Fatalf("wrong password from %s: %v, want ErrBadCredentials", address, err)
	}
}

func TestSignIn_BrakeNeverLocksOutTheRightPasswordFromAFreshAddress(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t, "ana@example.com")
	const attacker, user = "203.0.113.7", "198.51.100.2"
	for range 10 {
		mustFail(t, ctx, svc, "ana@example.com", attacker)
	}
	// The attacker's pair is braked, even with the right password.
	_, err := svc.SignIn(ctx, "ana@example.com", rightPassword, attacker)
	var ae *apperr.Error
	if apperr.Code(err) != apperr.ERATELIMIT || !asAppErr(err, &ae) || ae.Extra["retry_after"].(int) <= 0 {
		t.Fatalf("eleventh attempt from the attacker: %v, want a rate limit with retry_after", err)
	}
	// Ana, from her own address, signs in while her account is under attack.
	if p, err := svc.SignIn(ctx, "ana@example.com", rightPassword, user); err != nil || p.Email != "ana@example.com" {
		t.Fatalf("right password from a fresh address: %+v, %v", p, err)
	}
	// Her own mistyped password is still only a wrong password.
	mustFail(t, ctx, svc, "ana@example.com", user)
	// The attacker is still braked.
	if _, err := svc.SignIn(ctx, "ana@example.com", rightPassword, attacker); apperr.Code(err) != apperr.ERATELIMIT {
		t.Fatalf("attacker after the user signed in: %v, want a rate limit", err)
	}
}

func TestSignIn_RightPasswordsDoNotCountTowardTheBrake(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t, "bo@example.com")
	for range 30 {
		if _, err := svc.SignIn(ctx, "bo@example.com", rightPassword, "192.0.2.1"); err != nil {
			t.Fatalf("sign in: %v", err)
		}
	}
	for range 10 {
		mustFail(t, ctx, svc, "bo@example.com", "192.0.2.1")
	}
}

func TestSignIn_AnAddressFailingOnManyAccountsIsBraked(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t, "cy@example.com")
	const sprayer = "203.0.113.9"
	for i := range 50 {
		mustFail(t, ctx, svc, fmt.Sprintf("guess%d@example.com", i), sprayer)
	}
	if _, err := svc.SignIn(ctx, "cy@example.com", rightPassword, sprayer); apperr.Code(err) != apperr.ERATELIMIT {
		t.Fatalf("fifty-first attempt from the address: %v, want a rate limit", err)
	}
	if _, err := svc.SignIn(ctx, "cy@example.com", rightPassword, "203.0.113.10"); err != nil {
		t.Fatalf("the next address: %v", err)
	}
}

func TestSignIn_IPv6CountsByItsSlash64(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t, "di@example.com")
	for i := range 10 {
		mustFail(t, ctx, svc, "di@example.com", fmt.Sprintf("2001:db8:0:1::%x", i+1))
	}
	if _, err := svc.SignIn(ctx, "di@example.com", rightPassword, "2001:db8:0:1:ffff::1"); apperr.Code(err) != apperr.ERATELIMIT {
		t.Fatalf("another address of the same /64: %v, want a rate limit", err)
	}
	if _, err := svc.SignIn(ctx, "di@example.com", rightPassword, "2001:db8:0:2::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
}

func TestSignIn_ParallelGuessesCannotSlipUnderTheLimit(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t, "ed@example.com")
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() { _, errs[i] = svc.SignIn(ctx, "ed@example.com", "a wrong guess", "203.0.113.11") })
	}
	wg.Wait()
	checked := 0
	for _, err := range errs {
		switch apperr.Code(err) {
		case apperr.EUNAUTH:
			checked++
		case apperr.ERATELIMIT:
		default:
			t.Fatalf("parallel guess: %v", err)
		}
	}
	if checked > 10 {
		t.Fatalf("%d of 40 parallel guesses had their password checked, want at most 10", checked)
	}
}

func TestSignIn_OddEmailsAreWrongCredentialsNotErrors(t *testing.T) {
	t.Parallel()
	svc, ctx := newSignInService(t)
	for name, email := range map[string]string{
		"invalid UTF-8": "ana\xff@example.com", "NUL": "ana\x00@example.com", "very long": strings.Repeat("a", 100_000) + "@example.com",
		"empty": "", "control characters": "\r\n\t@example.com",
	} {
		if _, err := svc.SignIn(ctx, email, "whatever", "192.0.2.7"); err != auth.ErrBadCredentials {
			t.Errorf("%s: %v, want ErrBadCredentials", name, err)
		}
	}
}
