package web_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// newEnvCfg is a server with a configuration of the test's choosing.
func newEnvCfg(t *testing.T, cfg web.Config) *env {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return newEnvConfig(t, dbtest.MustPool(t), registry, cfg)
}

// behindProxy trusts the test's own address as the proxy.
var behindProxy = web.Config{CookieSecure: true, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// forwardedFor makes every request of c carry X-Forwarded-For: xff.
func (c *client) forwardedFor(xff string) *client {
	c.http.Transport = headerTransport{name: "X-Forwarded-For", value: &xff}
	return c
}

// setForwardedFor changes the X-Forwarded-For of a client made with forwardedFor.
func (c *client) setForwardedFor(xff string) { *c.http.Transport.(headerTransport).value = xff }

type headerTransport struct {
	name  string
	value *string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, *h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// createUser adds a user without signing in.
func (e *env) createUser(email string) {
	e.t.Helper()
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(e.t, e.ws), email, password, auth.RoleMember); err != nil {
		e.t.Fatal(err)
	}
}

// trySignIn posts the sign-in form and returns the status.
func (c *client) trySignIn(email, pw string) int {
	c.t.Helper()
	if c.csrf == "" {
		c.get("/signin")
	}
	resp, _ := c.postForm("/signin", url.Values{"email": {email}, "password": {pw}})
	return resp.StatusCode
}

func TestSignIn_BrakeNeverLocksOutTheRightPasswordFromAFreshClient(t *testing.T) {
	t.Parallel()
	e := newEnvCfg(t, behindProxy)
	e.createUser("ana@example.com")
	attacker := e.client().forwardedFor("203.0.113.7")
	for i := range 10 {
		// What the attacker puts left of the proxy's entry changes nothing.
		attacker.setForwardedFor(netip.AddrFrom4([4]byte{10, 9, 8, byte(i)}).String() + ", 203.0.113.7")
		if got := attacker.trySignIn("ana@example.com", "wrong guess"); got != http.StatusUnprocessableEntity {
			t.Fatalf("attempt %d: %d", i+1, got)
		}
	}
	if got := attacker.trySignIn("ana@example.com", password); got != http.StatusTooManyRequests {
		t.Fatalf("attacker with the right password after ten failures: %d, want 429", got)
	}
	user := e.client().forwardedFor("198.51.100.2")
	if got := user.trySignIn("ana@example.com", password); got != http.StatusSeeOther {
		t.Fatalf("the user from her own address while under attack: %d, want 303", got)
	}
	if resp, body := user.get("/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("home after sign-in: %d\n%s", resp.StatusCode, body)
	}
	attacker.setForwardedFor("203.0.113.7")
	if got := attacker.trySignIn("ana@example.com", password); got != http.StatusTooManyRequests {
		t.Fatalf("the attacker after the user signed in: %d, want 429", got)
	}
}

func TestSignIn_ForgedForwardedForNeitherResetsNorDodgesTheBrake(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // no trusted proxy: X-Forwarded-For is ignored
	e.createUser("bo@example.com")
	c := e.client().forwardedFor("")
	for i := range 10 {
		c.setForwardedFor(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}).String())
		if got := c.trySignIn("bo@example.com", "wrong guess"); got != http.StatusUnprocessableEntity {
			t.Fatalf("attempt %d: %d", i+1, got)
		}
	}
	for _, xff := range []string{"", "192.0.2.200", "127.0.0.1", "203.0.113.1, 10.0.0.1"} {
		c.setForwardedFor(xff)
		if got := c.trySignIn("bo@example.com", password); got != http.StatusTooManyRequests {
			t.Fatalf("X-Forwarded-For %q after ten failures: %d, want 429", xff, got)
		}
	}
}
