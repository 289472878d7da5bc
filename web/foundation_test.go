package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestSignIn_SeesHomeAndSessionSurvivesRestart(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	e := newEnvOn(t, pool)
	c := e.user("ana@example.com", auth.RoleMember)

	resp, body := c.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ana@example.com") || !strings.Contains(body, "Sign out") {
		t.Fatalf("home after sign-in: %d\n%s", resp.StatusCode, body)
	}
	// The session cookie is hardened.
	u, _ := url.Parse(e.url)
	cookies := c.http.Jar.Cookies(u)
	if len(cookies) == 0 {
		t.Fatal("no cookies kept")
	}

	// A second server on the same database (a restart, or another
	// instance behind a load balancer) knows the session.
	e2 := newEnvOn(t, pool)
	c.base = e2.url
	for _, ck := range cookies {
		u2, _ := url.Parse(e2.url)
		c.http.Jar.SetCookies(u2, []*http.Cookie{ck})
	}
	resp, body = c.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ana@example.com") {
		t.Fatalf("home on the restarted server: %d\n%s", resp.StatusCode, body)
	}

	// Sign-out ends the session.
	resp, _ = c.postForm("/signout", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	resp, _ = c.get("/")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("home after sign-out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestSignIn_CookiesAreSecureHttpOnlySameSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(t, e.ws), "bo@example.com", password, auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	c.get("/signin")
	resp, _ := c.postForm("/signin", url.Values{"email": {"bo@example.com"}, "password": {password}})
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "__Host-gatehouse_session" {
			session = ck
		}
	}
	if session == nil {
		t.Fatal("no __Host-gatehouse_session cookie set on sign-in")
	}
	if !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" || session.Domain != "" {
		t.Fatalf("session cookie = %+v, want Secure, HttpOnly, SameSite=Lax, Path=/ and no Domain", session)
	}
}

func TestSignIn_WrongPasswordRerendersWithMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(t, e.ws), "cy@example.com", password, auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	c.get("/signin")
	resp, body := c.postForm("/signin", url.Values{"email": {"cy@example.com"}, "password": {"not the password"}})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", resp.StatusCode)
	}
	if !strings.Contains(body, "The email or password is wrong.") || !strings.Contains(body, `value="cy@example.com"`) {
		t.Fatalf("form not re-rendered with the message and the typed email:\n%s", body)
	}
}

func TestSignIn_WithoutCSRFTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(t, e.ws), "di@example.com", password, auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	c.get("/signin")
	resp, _ := c.postForm("/signin", url.Values{"email": {"di@example.com"}, "password": {password}, "_csrf": {"forged"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("forged CSRF token: status %d, want 403", resp.StatusCode)
	}
	// A cross-site browser request is refused even with no token at all.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/signin", strings.NewReader("email=di@example.com&password="+url.QueryEscape(password)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther || resp.StatusCode < 400 {
		t.Fatalf("cross-site sign-in: status %d, want a refusal", resp.StatusCode)
	}
}

func TestSignIn_NextStaysOnThisSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(t, e.ws), "ed@example.com", password, auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	for next, want := range map[string]string{
		"/admin": "/admin", "//evil.example": "/", "https://evil.example": "/", "/\\evil": "/",
		"/\t/evil.example": "/", "/%5cevil.example": "/", "/%09/evil.example": "/", "javascript:alert(1)": "/",
	} {
		c := e.client()
		c.get("/signin")
		resp, _ := c.postForm("/signin", url.Values{"email": {"ed@example.com"}, "password": {password}, "next": {next}})
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("next=%q redirected to %q, want %q", next, got, want)
		}
	}
}

func TestAdmin_OnlyForApproversAndAdmins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	member := e.user("member@example.com", auth.RoleMember)
	approver := e.user("approver@example.com", auth.RoleApprover)

	resp, body := member.get("/admin")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "approvers and admins") {
		t.Fatalf("member on /admin: %d", resp.StatusCode)
	}
	if _, home := member.get("/"); strings.Contains(home, `href="/admin"`) {
		t.Error("a member's header links to Admin")
	}
	resp, body = approver.get("/admin")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "member@example.com") || !strings.Contains(body, `href="/admin"`) {
		t.Fatalf("approver on /admin: %d\n%s", resp.StatusCode, body)
	}
}

func TestAPI_TokenAuthentication(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)

	resp, me := e.api("GET", "/api/v1/me", agent, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /me: %d %v", resp.StatusCode, me)
	}
	tok, _ := me["token"].(map[string]any)
	if me["email"] != "owner@example.com" || me["role"] != "approver" || tok["kind"] != "agent" {
		t.Fatalf("/me = %v", me)
	}

	for name, token := range map[string]string{"made up": "gh_a_madeup", "empty": "", "not ours": "Bearer-ish"} {
		resp, p := e.api("GET", "/api/v1/me", token, nil)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" || p["code"] != "unauthorized" {
			t.Errorf("%s token: %d %s %v", name, resp.StatusCode, resp.Header.Get("Content-Type"), p)
		}
		if resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s token: 401 without WWW-Authenticate", name)
		}
	}

	// A revoked token stops working at once.
	id := mustUUID(t, tok["id"].(string))
	if err := e.auth.RevokeToken(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.api("GET", "/api/v1/me", agent, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d", resp.StatusCode)
	}
}

func TestAPI_UnknownRouteIsProblemJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	tok := e.token("owner@example.com", auth.TokenUser)
	resp, p := e.api("GET", "/api/v1/nothing-here", tok, nil)
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" || p["status"] != float64(404) {
		t.Fatalf("unknown route: %d %v", resp.StatusCode, p)
	}
}

func TestOpenAPIDocumentIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.url + "/api/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "openapi: 3") {
		t.Fatalf("openapi.yaml: %d %.40q", resp.StatusCode, body)
	}
}

func TestHealth_ReadyzFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	// A server whose database is gone is alive but not ready.
	dead, err := pgxpool.New(context.Background(), "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	down := newEnvWithPool(t, dead, e.auth)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503} {
		resp, err := http.Get(down + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s with the database down: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestMetricsAndSecureHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	http.Get(e.url + "/healthz")
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "requests_total") {
		t.Fatalf("/metrics: %d\n%.300s", resp.StatusCode, body)
	}
	resp, _ = e.client().get("/signin")
	for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("CSP = %q", resp.Header.Get("Content-Security-Policy"))
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	tok := e.token("owner@example.com", auth.TokenUser)
	resp, p := e.api("GET", "/api/v1/me", tok, strings.Repeat("x", 2<<20))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || p["code"] != "too_large" {
		t.Fatalf("2 MiB body: %d %v", resp.StatusCode, p)
	}
}

func TestSignIn_FailedAttemptsAreBraked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ana@example.com", auth.RoleMember)
	e.user("bob@example.com", auth.RoleMember)
	c := e.client()
	c.get("/signin")
	for i := range 10 {
		if resp, _ := c.postForm("/signin", url.Values{"email": {"ana@example.com"}, "password": {"wrong guess"}}); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("attempt %d: %d", i+1, resp.StatusCode)
		}
	}
	// The eleventh attempt is refused even with the right password.
	resp, body := c.postForm("/signin", url.Values{"email": {"ana@example.com"}, "password": {password}})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "Too many failed sign-ins") {
		t.Fatalf("after ten failures: %d %v", resp.StatusCode, resp.Header)
	}
	// Another account from the same address still signs in.
	resp, _ = c.postForm("/signin", url.Values{"email": {"bob@example.com"}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another account: %d", resp.StatusCode)
	}
}

// A page view that changes nothing in the session does not write it: its
// idle deadline moves on at most every tenth of the idle timeout (every
// minute at most), not on every GET, each of which was a write and a
// commit. A session still in use within that stays signed in, and one
// idle past its timeout ends.
func TestSession_APageViewWritesTheSessionOnlyWhenItsIdleDeadlineIsDue(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	const idle = 6 * time.Second // written again after 600 ms
	e := newEnvConfig(t, pool, registry, web.Config{CookieSecure: true, SessionIdle: idle})
	c := e.user("dee@example.com", auth.RoleMember)
	var sessions int
	expiry := func() time.Time {
		t.Helper()
		var at time.Time
		if err := pool.QueryRow(context.Background(), `SELECT count(*) OVER (), expiry FROM sessions`).Scan(&sessions, &at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	signedIn := expiry()
	for range 3 {
		if resp, body := c.get("/"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "dee@example.com") {
			t.Fatalf("home: %d", resp.StatusCode)
		}
	}
	if wrote := signedIn.Add(-idle); time.Since(wrote) >= idle/10 {
		// The session may rightly have been written again: too slow a
		// machine to tell.
		t.Skipf("three page views took %s after the session was written, past the %s it is written again after", time.Since(wrote), idle/10)
	}
	if at := expiry(); !at.Equal(signedIn) || sessions != 1 {
		t.Fatalf("three page views right after signing in wrote the session: expiry %s, then %s (%d sessions)", signedIn, at, sessions)
	}
	time.Sleep(idle / 10)
	c.get("/")
	moved := expiry()
	if !moved.After(signedIn) {
		t.Fatalf("a page view a tenth of the idle timeout later did not move the idle deadline: %s, then %s", signedIn, moved)
	}
	// Kept in use, the session outlives its first idle deadline (the one
	// signing in set).
	for time.Now().Before(signedIn.Add(idle / 10)) {
		if resp, _ := c.get("/"); resp.StatusCode != http.StatusOK {
			t.Fatalf("a session in use ended: %d", resp.StatusCode)
		}
		time.Sleep(idle / 10)
	}
	// Left idle, it ends.
	time.Sleep(idle + idle/10)
	if resp, _ := c.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session idle past its timeout: %d, want a redirect to sign in", resp.StatusCode)
	}
}
