package web_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const password = "a long enough password"

// testReceiptKey signs the test servers' receipt checkpoints.
var testReceiptKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// env is one test's server on its own database.
type env struct {
	srv  *web.Server
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	auth *auth.Service
	ws   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := dbtest.MustPool(t)
	return newEnvOn(t, pool)
}

func newEnvOn(t *testing.T, pool *pgxpool.Pool) *env {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return newEnvWith(t, pool, registry)
}

// liftedRegistry is the built-in tools with the per-agent limits of
// records.put, records.get and records.search raised far above their
// classes' defaults (60 and 120 a minute), as an operator's policy file
// would, for tests that make hundreds of such calls from one token and
// are not about limits.
func liftedRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	lift := "    rate_limits: {per_agent_per_minute: 1000000}\n"
	file, err := tools.ParsePolicyFile([]byte("tools:\n  records.put:\n"+lift+"  records.get:\n"+lift+"  records.search:\n"+lift),
		registry.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.ApplyOverrides(registry, file); err != nil {
		t.Fatal(err)
	}
	return registry
}

// newEnvWith is a server with its own tool registry.
func newEnvWith(t *testing.T, pool *pgxpool.Pool, registry *tools.Registry) *env {
	t.Helper()
	return newEnvConfig(t, pool, registry, web.Config{CookieSecure: true})
}

// newEnvConfig is a server with its own tool registry and configuration.
func newEnvConfig(t *testing.T, pool *pgxpool.Pool, registry *tools.Registry, cfg web.Config) *env {
	t.Helper()
	svc := web.NewServices(pool, slog.New(slog.DiscardHandler), auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry)
	svc.Proposals.SetIdempotencyWait(300 * time.Millisecond)
	a := svc.Auth
	ws, err := a.EnsureDefaultWorkspace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ReceiptKey == nil {
		cfg.ReceiptKey = testReceiptKey
	}
	srv, err := web.New(cfg, slog.New(slog.DiscardHandler), pool, svc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &env{t: t, url: hs.URL, pool: pool, auth: a, ws: ws.String(), srv: srv}
}

// user creates a user and returns a browser-like client signed in as them.
func (e *env) user(email string, role auth.Role) *client {
	e.t.Helper()
	if _, err := e.auth.CreateUser(context.Background(), mustUUID(e.t, e.ws), email, password, role); err != nil {
		e.t.Fatal(err)
	}
	c := e.client()
	c.signIn(email, password)
	return c
}

func (e *env) token(email string, kind auth.TokenKind) string {
	e.t.Helper()
	tok, err := e.auth.CreateToken(context.Background(), email, kind, "test "+string(kind))
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// client is a cookie-keeping HTTP client that does not follow redirects.
type client struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

func (e *env) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: e.t, base: e.url, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches a page and remembers its CSRF token.
func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	body := readBody(c.t, resp)
	if m := csrfField.FindStringSubmatch(body); m != nil {
		c.csrf = m[1]
	}
	return resp, body
}

func (c *client) postForm(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if c.csrf != "" && form.Get("_csrf") == "" {
		form.Set("_csrf", c.csrf)
	}
	resp, err := c.http.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, readBody(c.t, resp)
}

func (c *client) signIn(email, pw string) {
	c.t.Helper()
	c.get("/signin")
	resp, body := c.postForm("/signin", url.Values{"email": {email}, "password": {pw}})
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("sign in as %s: status %d\n%s", email, resp.StatusCode, body)
	}
	// The CSRF token rotates at sign-in: the new one is in its cookie.
	c.csrf = c.cookie("gatehouse_csrf")
}

// cookie is the value of the client's cookie with that name, with or
// without the __Host- prefix ("" when there is none).
func (c *client) cookie(name string) string {
	u, _ := url.Parse(c.base)
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == name || ck.Name == "__Host-"+name {
			return ck.Value
		}
	}
	return ""
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// api calls the REST API with a bearer token and checks the response
// against openapi.yaml.
func (e *env) api(method, path, token string, body any) (*http.Response, map[string]any) {
	e.t.Helper()
	var rdr io.Reader
	var raw []byte
	if body != nil {
		switch b := body.(type) {
		case string:
			raw = []byte(b)
		default:
			raw, _ = json.Marshal(b)
		}
		rdr = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, e.url+path, rdr)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	respBody := []byte(readBody(e.t, resp))
	checkAgainstSpec(e.t, req, raw, resp, respBody)
	var out map[string]any
	if len(respBody) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(respBody, &out); err != nil {
			e.t.Fatalf("%s %s: body is not a JSON object: %s", method, path, respBody)
		}
	}
	return resp, out
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

// checkAgainstSpec fails the test when a response of a documented operation
// does not match openapi.yaml.
func checkAgainstSpec(t *testing.T, req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	t.Helper()
	specOnce.Do(func() {
		// Cheatsheets are markdown: plain text to the validator.
		openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder)
		doc, err := web.LoadOpenAPI()
		if err != nil {
			specErr = err
			return
		}
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	u, _ := url.Parse(req.URL.String())
	r2, _ := http.NewRequest(req.Method, u.Path+"?"+u.RawQuery, bytes.NewReader(reqBody))
	r2.Header = req.Header
	route, params, err := specRouter.FindRoute(r2)
	if err != nil {
		return // not a documented operation
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r2, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s → %d does not match openapi.yaml: %v\n%s", req.Method, u.Path, resp.StatusCode, err, body)
	}
}

// newEnvWithPool serves with an arbitrary pool (one whose database is down).
func newEnvWithPool(t *testing.T, pool *pgxpool.Pool, a *auth.Service) string {
	t.Helper()
	srv, err := web.New(web.Config{}, slog.New(slog.DiscardHandler), pool, web.Services{Auth: a})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL
}
