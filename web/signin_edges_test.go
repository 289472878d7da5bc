package web_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
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

// setCookies are the cookies a response sets, by name.
func setCookies(resp *http.Response) map[string]*http.Cookie {
	out := map[string]*http.Cookie{}
	for _, ck := range resp.Cookies() {
		out[ck.Name] = ck
	}
	return out
}

func TestSignIn_RotatesTheCSRFToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createUser("cy@example.com")
	c := e.client()
	c.get("/signin")
	before := c.cookie("gatehouse_csrf")
	if before == "" || before != c.csrf {
		t.Fatalf("CSRF cookie %q, form token %q before sign-in", before, c.csrf)
	}
	resp, _ := c.postForm("/signin", url.Values{"email": {"cy@example.com"}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	n := 0
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "__Host-gatehouse_csrf=") {
			n++
		}
	}
	after := c.cookie("gatehouse_csrf")
	if n != 1 || after == "" || after == before {
		t.Fatalf("sign-in set %d CSRF cookies; token %q before, %q after: want one new token", n, before, after)
	}
	// The old token is worth nothing now; the new one works.
	if resp, _ := c.postForm("/conversations", url.Values{"title": {"x"}, "_csrf": {before}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a form with the token from before sign-in: %d, want 403", resp.StatusCode)
	}
	if _, body := c.get("/conversations"); !strings.Contains(body, `value="`+after+`"`) {
		t.Fatalf("the next page does not carry the new token:\n%s", body)
	}
	if resp, body := c.postForm("/conversations", url.Values{"title": {"x"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a form with the new token: %d\n%s", resp.StatusCode, body)
	}
	// Sign-out rotates it again.
	c.postForm("/signout", nil)
	if out := c.cookie("gatehouse_csrf"); out == "" || out == after {
		t.Fatalf("token after sign-out %q, before %q: want a new one", out, after)
	}
}

func TestCookies_HostPrefixedWhenSecurePlainOtherwise(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		e := newEnvCfg(t, web.Config{CookieSecure: secure})
		e.createUser("di@example.com")
		c := e.client()
		resp, _ := c.get("/signin")
		csrfName := map[bool]string{true: "__Host-gatehouse_csrf", false: "gatehouse_csrf"}[secure]
		sessionName := map[bool]string{true: "__Host-gatehouse_session", false: "gatehouse_session"}[secure]
		got := setCookies(resp)
		resp, _ = c.postForm("/signin", url.Values{"email": {"di@example.com"}, "password": {password}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("secure=%v: sign in: %d", secure, resp.StatusCode)
		}
		for k, v := range setCookies(resp) {
			got[k] = v
		}
		if len(got) != 2 {
			t.Errorf("secure=%v: cookies %v, want %s and %s", secure, keys(got), sessionName, csrfName)
		}
		for _, name := range []string{sessionName, csrfName} {
			ck := got[name]
			if ck == nil {
				t.Errorf("secure=%v: no cookie %s among %v", secure, name, keys(got))
				continue
			}
			if ck.Secure != secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode {
				t.Errorf("secure=%v: %s = %+v, want Secure=%v, Path=/, no Domain, HttpOnly, SameSite=Lax", secure, name, ck, secure)
			}
		}
	}
}

func keys(m map[string]*http.Cookie) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSignedInPages_AreNeverStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	member := e.user("ed@example.com", auth.RoleMember)
	approver := e.user("fa@example.com", auth.RoleApprover)
	tok := e.token("fa@example.com", auth.TokenUser)
	check := func(what string, resp *http.Response, status int) {
		t.Helper()
		if resp.StatusCode != status || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: %d Cache-Control %q, want %d no-store", what, resp.StatusCode, resp.Header.Get("Cache-Control"), status)
		}
	}
	resp, _ := member.get("/")
	check("home", resp, http.StatusOK)
	resp, _ = member.get("/admin")
	check("a member's error page on /admin", resp, http.StatusForbidden)
	resp, _ = member.get("/conversations/" + "00000000-0000-0000-0000-000000000000")
	check("a missing conversation", resp, http.StatusNotFound)
	resp, _ = approver.get("/admin/approvals")
	check("the approvals queue", resp, http.StatusOK)
	resp, _ = e.client().get("/")
	check("the sign-in redirect", resp, http.StatusSeeOther)
	req, _ := http.NewRequest(http.MethodGet, e.url+"/admin/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	check("the queue's JSON for a token", resp, http.StatusOK)
}

// send makes a request with the client's cookies and the given headers.
func (c *client) send(method, path string, form url.Values, headers map[string]string) (*http.Response, string) {
	c.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, readBody(c.t, resp)
}

func isProblem(resp *http.Response, body, code string) bool {
	return resp.Header.Get("Content-Type") == "application/problem+json" && strings.Contains(body, `"code":"`+code+`"`)
}

func TestBearer_WithASessionCookieIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	approver := e.user("gi@example.com", auth.RoleApprover)
	tok := e.token("gi@example.com", auth.TokenUser)
	bearer := map[string]string{"Authorization": "Bearer " + tok, "Accept": "text/html"}
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/approvals"},
		{"POST", "/admin/approvals/" + "00000000-0000-0000-0000-000000000000" + "/approve"},
		{"GET", "/"},
		{"POST", "/conversations"},
	} {
		var form url.Values
		if r.method == "POST" {
			form = url.Values{"title": {"x"}, "_csrf": {approver.csrf}}
		}
		resp, body := approver.send(r.method, r.path, form, bearer)
		if resp.StatusCode != http.StatusBadRequest || !isProblem(resp, body, "bad_request") || !strings.Contains(body, "not both") {
			t.Errorf("%s %s with a token and a session cookie: %d %s", r.method, r.path, resp.StatusCode, body)
		}
	}
	if _, body := approver.get("/conversations"); strings.Contains(body, ">x<") {
		t.Error("a conversation was created by the refused request")
	}
	// The token alone works, cross-site too: it is not a browser's credential.
	script := e.client()
	resp, body := script.send("GET", "/admin/approvals", nil, map[string]string{"Authorization": "bearer " + tok, "Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("the token alone: %d %s", resp.StatusCode, body)
	}
}

func TestBearer_InvalidTokenIsA401AndSkipsNoBrowserProtection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createUser("ha@example.com")
	bogus := map[string]string{"Authorization": "Bearer gh_u_not-a-real-token", "Accept": "text/html"}

	// On the endpoints that take a token: 401 problem+json, never the
	// browser chain.
	c := e.client()
	for _, path := range []string{"/admin/approvals", "/admin/approvals/00000000-0000-0000-0000-000000000000/approve"} {
		method := map[bool]string{true: "POST", false: "GET"}[strings.HasSuffix(path, "/approve")]
		resp, body := c.send(method, path, url.Values{}, bogus)
		if resp.StatusCode != http.StatusUnauthorized || !isProblem(resp, body, "unauthorized") {
			t.Errorf("%s %s with a bad token: %d %s", method, path, resp.StatusCode, body)
		}
	}

	// A sign-in form with a bearer header gets the browser's protections:
	// cross-site, it is refused; without a CSRF token, too.
	form := url.Values{"email": {"ha@example.com"}, "password": {password}}
	for name, headers := range map[string]map[string]string{
		"cross-site":      {"Authorization": "Bearer gh_u_not-a-real-token", "Sec-Fetch-Site": "cross-site"},
		"no CSRF token":   {"Authorization": "Bearer gh_u_not-a-real-token"},
		"lowercase token": {"Authorization": "bearer gh_u_not-a-real-token"},
	} {
		resp, body := e.client().send("POST", "/signin", form, headers)
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("sign-in form with a bearer header, %s: %d %s, want a CSRF refusal", name, resp.StatusCode, body)
		}
		if setCookies(resp)["__Host-gatehouse_session"] != nil {
			t.Errorf("sign-in form with a bearer header, %s: signed in", name)
		}
	}
}

func TestBearer_ApprovalEndpointsAnswerProblemJSONWhateverTheAccept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createUser("ib@example.com")
	member := e.token("ib@example.com", auth.TokenUser)
	c := e.client()
	for _, accept := range []string{"text/html", "*/*", ""} {
		h := map[string]string{"Authorization": "Bearer " + member, "Accept": accept}
		resp, body := c.send("GET", "/admin/approvals", nil, h)
		if resp.StatusCode != http.StatusForbidden || !isProblem(resp, body, "forbidden") {
			t.Errorf("Accept %q, a member's token on the queue: %d %s", accept, resp.StatusCode, body)
		}
	}
}
