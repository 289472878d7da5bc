package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The MCP authorization flow (OAuth 2.1) against a real server: metadata,
// registration, consent by a signed-in person, tokens bound to /mcp.

// oauthApp is a client registered through /oauth/register.
type oauthApp struct {
	e        *env
	id       string
	redirect string
}

// registerClient posts a registration (any JSON) and returns the answer.
func (e *env) registerClient(body string) (*http.Response, map[string]any) {
	e.t.Helper()
	resp, err := http.Post(e.url+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(readBody(e.t, resp)), &out)
	return resp, out
}

func (e *env) registerApp(name, redirect string) *oauthApp {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	resp, out := e.registerClient(string(b))
	if resp.StatusCode != http.StatusCreated || out["client_id"] == "" {
		e.t.Fatalf("register: %d %v", resp.StatusCode, out)
	}
	return &oauthApp{e: e, id: out["client_id"].(string), redirect: redirect}
}

// request is an authorization request with a new PKCE verifier.
func (a *oauthApp) request() (url.Values, string) {
	verifier := oauth2.GenerateVerifier()
	return url.Values{"response_type": {"code"}, "client_id": {a.id}, "redirect_uri": {a.redirect}, "state": {"st-" + verifier[:8]},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "resource": {a.e.url + "/mcp"}}, verifier
}

var hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`)

// hiddenFields are a page's hidden form fields.
func hiddenFields(page string) url.Values {
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(page, -1) {
		v.Set(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
	}
	return v
}

// consent opens the authorization request signed in as person and posts
// the consent form with choices; it returns the answer.
func consent(t *testing.T, person *client, q url.Values, choices url.Values) (*http.Response, string) {
	t.Helper()
	resp, page := person.get("/oauth/authorize?" + q.Encode())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the consent page: %d\n%s", resp.StatusCode, page)
	}
	form := hiddenFields(page)
	for k, vs := range choices {
		form[k] = vs
	}
	return person.postForm("/oauth/authorize", form)
}

// approve consents and returns the query the client is sent back with.
func (a *oauthApp) approve(person *client, q url.Values, choices url.Values) url.Values {
	a.e.t.Helper()
	if choices.Get("decision") == "" {
		choices.Set("decision", "approve")
	}
	resp, body := consent(a.e.t, person, q, choices)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, a.redirect+"?") {
		a.e.t.Fatalf("approve: %d %q\n%s", resp.StatusCode, loc, body)
	}
	u, _ := url.Parse(loc)
	return u.Query()
}

// oauthToken posts a token request.
func (e *env) oauthToken(form url.Values) (*http.Response, map[string]any) {
	e.t.Helper()
	resp, err := http.PostForm(e.url+"/oauth/token", form)
	if err != nil {
		e.t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(readBody(e.t, resp)), &out)
	return resp, out
}

// grant runs the whole flow for person and returns the tokens.
func (a *oauthApp) grant(person *client, choices url.Values) (access, refresh string) {
	a.e.t.Helper()
	q, verifier := a.request()
	back := a.approve(person, q, choices)
	resp, tok := a.e.oauthToken(url.Values{"grant_type": {"authorization_code"}, "code": {back.Get("code")}, "redirect_uri": {a.redirect},
		"client_id": {a.id}, "code_verifier": {verifier}, "resource": {a.e.url + "/mcp"}})
	if resp.StatusCode != http.StatusOK {
		a.e.t.Fatalf("exchange: %d %v", resp.StatusCode, tok)
	}
	return tok["access_token"].(string), tok["refresh_token"].(string)
}

func (a *oauthApp) refresh(token string) (*http.Response, map[string]any) {
	a.e.t.Helper()
	return a.e.oauthToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {a.id}})
}

// mcpInitialize posts an initialize request to /mcp with token, as host
// (the Host header; "" for the server's own), and returns the answer.
func (e *env) mcpInitialize(token, host string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, readBody(e.t, resp)
}

// rows counts the rows of the OAuth tables and tokens.
func (e *env) rows() string {
	e.t.Helper()
	var clients, codes, tokens, refresh int
	if err := e.pool.QueryRow(e.t.Context(), `SELECT (SELECT count(*) FROM oauth_clients), (SELECT count(*) FROM oauth_codes),
		(SELECT count(*) FROM api_tokens), (SELECT count(*) FROM oauth_refresh_tokens)`).Scan(&clients, &codes, &tokens, &refresh); err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprintf("clients=%d codes=%d tokens=%d refresh=%d", clients, codes, tokens, refresh)
}

func isOAuthError(t *testing.T, what string, resp *http.Response, body map[string]any, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || body["error"] != code || body["error_description"] == "" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: %d %v (Cache-Control %q), want %d %s", what, resp.StatusCode, body, resp.Header.Get("Cache-Control"), status, code)
	}
}

func TestOAuth_MetadataDocumentsNameTheMCPResourceAndGatehouseAsItsAuthorizationServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	get := func(path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		req.Header.Set("Origin", "http://localhost:6274") // a browser-based client
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("%s: %d %v\n%s", path, resp.StatusCode, resp.Header, body)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		prm := get(path)
		if prm["resource"] != e.url+"/mcp" || fmt.Sprint(prm["authorization_servers"]) != "["+e.url+"]" || fmt.Sprint(prm["bearer_methods_supported"]) != "[header]" {
			t.Errorf("%s: %v", path, prm)
		}
	}
	// What the SDK checks: the resource of the metadata at /mcp's path.
	if prm, err := oauthex.GetProtectedResourceMetadata(t.Context(), e.url+"/.well-known/oauth-protected-resource/mcp", e.url+"/mcp", http.DefaultClient); err != nil || prm.Resource != e.url+"/mcp" {
		t.Errorf("the SDK refuses the resource metadata: %v", err)
	}
	as := get("/.well-known/oauth-authorization-server")
	want := map[string]string{
		"issuer": e.url, "authorization_endpoint": e.url + "/oauth/authorize", "token_endpoint": e.url + "/oauth/token",
		"registration_endpoint": e.url + "/oauth/register", "response_types_supported": "[code]", "code_challenge_methods_supported": "[S256]",
		"grant_types_supported": "[authorization_code refresh_token]", "token_endpoint_auth_methods_supported": "[none]",
		"authorization_response_iss_parameter_supported": "true",
	}
	for k, v := range want {
		if fmt.Sprint(as[k]) != v {
			t.Errorf("authorization server metadata %s = %v, want %s", k, as[k], v)
		}
	}
	if _, ok := as["jwks_uri"]; ok {
		t.Errorf("an empty jwks_uri is sent: %v", as)
	}
	if asm, err := oauthex.GetAuthServerMeta(t.Context(), e.url+"/.well-known/oauth-authorization-server", e.url, http.DefaultClient); err != nil || asm.Issuer != e.url {
		t.Errorf("the SDK refuses the authorization server metadata: %v", err)
	}
	// A browser-based client's preflight is answered.
	req, _ := http.NewRequest(http.MethodOptions, e.url+"/oauth/token", nil)
	req.Header.Set("Origin", "http://localhost:6274")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestOAuth_UnauthorizedMCPNamesItsResourceMetadataAndABadTokenIsInvalidToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, _ := e.mcpInitialize("", "")
	want := `Bearer realm="gatehouse", resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("no token: %d %q, want %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	resp, _ = e.mcpInitialize("gh_a_not-a-token", "")
	want = `Bearer realm="gatehouse", error="invalid_token", resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("bad token: %d %q, want %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	ch, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(ch) != 1 || ch[0].Params["resource_metadata"] != e.url+"/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("the SDK reads %v, %v", ch, err)
	}
	// The REST API's 401 keeps its realm and says the token is invalid; it
	// is not an OAuth resource.
	r, _ := e.api("GET", "/api/v1/me", "gh_a_not-a-token", nil)
	if got := r.Header.Get("WWW-Authenticate"); got != `Bearer realm="gatehouse", error="invalid_token"` {
		t.Errorf("API: %q", got)
	}
}

// The official Go SDK's OAuth client, from nothing but /mcp's URL: the
// 401 leads it to the metadata, it registers, the person consents (here
// an HTTP client with their session, posting the form with its CSRF
// token), it exchanges the code with its PKCE verifier, and the session
// lists and calls tools in the conversation chosen at consent.
func TestOAuth_GoSDKClientDiscoversRegistersGetsConsentAndCallsATool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	user := e.token("ana@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "Support desk"})
	convID := conv["id"].(string)

	redirect := "http://127.0.0.1:51789/callback" // the code is read from the Location header: nothing listens there
	var consentPage string
	fetch := func(ctx context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
		u, err := url.Parse(args.URL)
		if err != nil || u.Scheme+"://"+u.Host != e.url || u.Path != "/oauth/authorize" {
			return nil, fmt.Errorf("authorization URL %q", args.URL)
		}
		resp, page := ana.get(u.RequestURI())
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("consent page: %d", resp.StatusCode)
		}
		consentPage = page
		form := hiddenFields(page)
		form.Set("target", "conversation:"+convID)
		form.Set("access", "all")
		form.Set("decision", "approve")
		resp, body := ana.postForm("/oauth/authorize", form)
		if resp.StatusCode != http.StatusSeeOther {
			return nil, fmt.Errorf("consent: %d %s", resp.StatusCode, body)
		}
		back, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || !strings.HasPrefix(back.String(), redirect+"?") {
			return nil, fmt.Errorf("sent back to %q", resp.Header.Get("Location"))
		}
		q := back.Query()
		return &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
	handler, err := sdkauth.NewAuthorizationCodeHandler(&sdkauth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Test agent", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		AuthorizationCodeFetcher: fetch,
		RequestRefreshToken:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	transport := &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", OAuthHandler: handler, MaxRetries: -1}
	session, err := sdk.NewClient(&sdk.Implementation{Name: "oauth-agent", Version: "1.0"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	defer session.Close()
	for _, want := range []string{"Test agent", "unverified", "127.0.0.1:51789", "Support desk", `name="_csrf"`} {
		if !strings.Contains(consentPage, want) {
			t.Errorf("the consent page does not show %q", want)
		}
	}
	tools, err := session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("list tools: %v", err)
	}
	res, text := callTool(t, session, "records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"})
	if res.IsError || !strings.Contains(text, `"status":"applied"`) {
		t.Fatalf("call: %s", text)
	}
	// The call is in the conversation chosen at consent; no other was made.
	_, msgs := e.api("GET", "/api/v1/conversations/"+convID+"/messages", user, nil)
	if m := msgs["messages"].([]any); len(m) != 1 || m[0].(map[string]any)["content"] != "records.search" {
		t.Fatalf("the bound conversation's transcript: %v", m)
	}
	if _, list := e.api("GET", "/api/v1/conversations", user, nil); len(list["conversations"].([]any)) != 1 {
		t.Fatalf("another conversation was made: %v", list)
	}

	// The grant is one agent token, stored hashed, bound to /mcp.
	ts, _ := handler.TokenSource(ctx)
	tok, err := ts.Token()
	if err != nil || !strings.HasPrefix(tok.AccessToken, "gh_o_") || tok.RefreshToken == "" {
		t.Fatalf("the SDK's token: %v", err)
	}
	var kind, name, audience string
	var conversation *string
	var accessLeft, grantLeft time.Duration
	access := sha256.Sum256([]byte(tok.AccessToken))
	refresh := sha256.Sum256([]byte(tok.RefreshToken))
	if err := e.pool.QueryRow(t.Context(), `SELECT t.kind, t.name, t.audience, t.conversation_id::text,
		    extract(epoch FROM t.secret_expires_at - now()) * interval '1 second', extract(epoch FROM t.expires_at - now()) * interval '1 second'
		FROM api_tokens t JOIN oauth_refresh_tokens r ON r.token_id = t.id
		WHERE t.token_hash = $1 AND r.token_hash = $2`, access[:], refresh[:]).Scan(&kind, &name, &audience, &conversation, &accessLeft, &grantLeft); err != nil {
		t.Fatalf("the grant's row: %v", err)
	}
	if kind != "agent" || name != "OAuth: Test agent" || audience != e.url+"/mcp" || conversation == nil || *conversation != convID ||
		accessLeft > time.Hour || accessLeft < 55*time.Minute || grantLeft < 29*24*time.Hour || grantLeft > 30*24*time.Hour {
		t.Errorf("grant: %s %q %s %v access %v grant %v", kind, name, audience, conversation, accessLeft, grantLeft)
	}
	var plain int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM api_tokens t, oauth_refresh_tokens r, oauth_codes c
		WHERE position($1 in t.name || t.audience || encode(t.token_hash, 'escape') || encode(r.token_hash, 'escape') || encode(c.code_hash, 'escape')) > 0`,
		tok.AccessToken).Scan(&plain); err != nil || plain != 0 {
		t.Errorf("a secret is stored as it is: %d %v", plain, err)
	}
	// The token is for /mcp only: the REST API refuses it.
	if r, _ := e.api("GET", "/api/v1/me", tok.AccessToken, nil); r.StatusCode != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("the REST API with an MCP token: %d %q", r.StatusCode, r.Header.Get("WWW-Authenticate"))
	}
	// /tokens lists it as an agent token with its client and expiry.
	_, page := ana.get("/tokens")
	if !strings.Contains(page, "OAuth: Test agent") || !strings.Contains(page, `data-testid="token-oauth"`) || !strings.Contains(page, "127.0.0.1:51789") ||
		!strings.Contains(page, "conversation “Support desk”") || !strings.Contains(page, "access token until ") {
		t.Errorf("/tokens does not show the grant:\n%s", page)
	}
	var audited string
	if err := e.pool.QueryRow(t.Context(), `SELECT action || ':' || actor_kind || ':' || (data->>'audience') FROM audit_events WHERE subject_type = 'api_token' AND data ? 'oauth_client_id'`).Scan(&audited); err != nil || audited != "token.created:user:"+e.url+"/mcp" {
		t.Errorf("audit: %q %v", audited, err)
	}
}

// A person who is not signed in signs in and lands on the same
// authorization request.
func TestOAuth_SignedOutPersonSignsInAndReturnsToTheConsent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ana@example.com", auth.RoleMember)
	app := e.registerApp("Returning agent", "https://agent.example.com/cb")
	q, _ := app.request()
	target := "/oauth/authorize?" + q.Encode()
	browser := e.client()
	resp, _ := browser.get(target)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next="+url.QueryEscape(target) {
		t.Fatalf("signed out: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	browser.get(resp.Header.Get("Location"))
	resp, body := browser.postForm("/signin", url.Values{"email": {"ana@example.com"}, "password": {password}, "next": {target}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != target {
		t.Fatalf("sign in: %d %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	browser.csrf = browser.cookie("gatehouse_csrf")
	resp, page := browser.get(target)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "Returning agent") || !strings.Contains(page, "agent.example.com") {
		t.Fatalf("back at the consent: %d\n%s", resp.StatusCode, page)
	}
	// Its CSP lets the answer go on to the client, and nowhere else.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://agent.example.com;") {
		t.Errorf("CSP: %q", csp)
	}
}

// A person who denies, a forged form, a conversation that is not theirs:
// each is answered as OAuth and the specification say, and writes nothing.
func TestOAuth_DeniedForgedOrForeignConsentWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	e.user("bo@example.com", auth.RoleMember)
	_, bosConv := e.api("POST", "/api/v1/conversations", e.token("bo@example.com", auth.TokenUser), map[string]any{"title": "Bo's"})
	app := e.registerApp("Agent", "https://agent.example.com/cb")
	before := e.rows()

	q, _ := app.request()
	resp, _ := consent(t, ana, q, url.Values{"decision": {"deny"}, "target": {"new"}, "access": {"all"}})
	back, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || back.Host != "agent.example.com" || back.Query().Get("error") != "access_denied" ||
		back.Query().Get("state") != q.Get("state") || back.Query().Get("code") != "" || back.Query().Get("iss") != e.url {
		t.Errorf("deny: %d %s", resp.StatusCode, back)
	}
	resp, _ = consent(t, ana, q, url.Values{"decision": {"approve"}, "_csrf": {"forged"}, "access": {"all"}})
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
		t.Errorf("without the CSRF token: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := consent(t, ana, q, url.Values{"decision": {"approve"}, "target": {"conversation:" + bosConv["id"].(string)}, "access": {"all"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="target-error"`) {
		t.Errorf("another's conversation: %d", resp.StatusCode)
	}
	resp, body = consent(t, ana, q, url.Values{"decision": {"approve"}, "target": {"new"}, "access": {"admin"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="access-error"`) {
		t.Errorf("an unknown access: %d", resp.StatusCode)
	}
	// The form never acts on GET.
	form := q
	form.Set("decision", "approve")
	if resp, _ := ana.get("/oauth/authorize?" + form.Encode()); resp.StatusCode != http.StatusOK {
		t.Errorf("GET with decision=approve: %d", resp.StatusCode)
	}
	if after := e.rows(); after != before {
		t.Errorf("written: %s → %s", before, after)
	}
}

// Faults in the authorization request: an unknown client or redirect URI
// is shown to the person and never redirected; the others go back to the
// client with their error. Nothing is written.
func TestOAuth_BadAuthorizationRequestsAreRefusedAsTheSpecificationSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	app := e.registerApp("Agent", "http://127.0.0.1:4000/cb")
	before := e.rows()
	for name, c := range map[string]struct {
		edit  func(url.Values)
		error string // "" : an error page, no redirect
	}{
		"unknown client":               {func(q url.Values) { q.Set("client_id", "6f0d8a57-7d5c-4a0e-9d0e-3c1b2a4d5e6f") }, ""},
		"malformed client id":          {func(q url.Values) { q.Set("client_id", "x") }, ""},
		"unregistered redirect URI":    {func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, ""},
		"redirect URI on another path": {func(q url.Values) { q.Set("redirect_uri", "http://127.0.0.1:4000/other") }, ""},
		"no redirect URI":              {func(q url.Values) { q.Del("redirect_uri") }, ""},
		"plain PKCE":                   {func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
		"no PKCE":                      {func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, "invalid_request"},
		"malformed challenge":          {func(q url.Values) { q.Set("code_challenge", "short") }, "invalid_request"},
		"implicit grant":               {func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		"another resource":             {func(q url.Values) { q.Set("resource", "https://other.example/mcp") }, "invalid_target"},
		"the REST API as resource":     {func(q url.Values) { q.Set("resource", e.url+"/api/v1") }, "invalid_target"},
		"a parameter twice":            {func(q url.Values) { q.Add("state", "again") }, "invalid_request"},
	} {
		q, _ := app.request()
		c.edit(q)
		resp, body := ana.get("/oauth/authorize?" + q.Encode())
		loc := resp.Header.Get("Location")
		if c.error == "" {
			if resp.StatusCode != http.StatusBadRequest || loc != "" || !strings.Contains(body, "connect again") {
				t.Errorf("%s: %d %q", name, resp.StatusCode, loc)
			}
			continue
		}
		back, _ := url.Parse(loc)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "http://127.0.0.1:4000/cb?") || back.Query().Get("error") != c.error ||
			back.Query().Get("code") != "" || back.Query().Get("iss") != e.url {
			t.Errorf("%s: %d %q, want error %s", name, resp.StatusCode, loc, c.error)
		}
	}
	// A loopback redirect URI may come with another port (a native
	// client's listener); nothing else may differ.
	q, _ := app.request()
	q.Set("redirect_uri", "http://127.0.0.1:4999/cb")
	if resp, _ := ana.get("/oauth/authorize?" + q.Encode()); resp.StatusCode != http.StatusOK {
		t.Errorf("loopback on another port: %d", resp.StatusCode)
	}
	if after := e.rows(); after != before {
		t.Errorf("written: %s → %s", before, after)
	}
}

func TestOAuth_CodeExchangeRefusalsAndAReplayedCodeRevokesItsGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	app := e.registerApp("Agent", "http://127.0.0.1:4000/cb")
	other := e.registerApp("Other", "http://127.0.0.1:4000/cb")
	q, verifier := app.request()
	code := app.approve(ana, q, url.Values{"target": {"new"}, "access": {"read"}}).Get("code")
	exchange := func(edit func(url.Values)) (*http.Response, map[string]any) {
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {app.redirect}, "client_id": {app.id}, "code_verifier": {verifier}}
		edit(form)
		return e.oauthToken(form)
	}
	before := e.rows()
	for name, c := range map[string]struct {
		edit   func(url.Values)
		status int
		error  string
	}{
		"PKCE mismatch":             {func(f url.Values) { f.Set("code_verifier", oauth2.GenerateVerifier()) }, 400, "invalid_grant"},
		"the challenge as verifier": {func(f url.Values) { f.Set("code_verifier", q.Get("code_challenge")) }, 400, "invalid_grant"},
		"no verifier":               {func(f url.Values) { f.Del("code_verifier") }, 400, "invalid_request"},
		"another redirect URI":      {func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:4001/cb") }, 400, "invalid_grant"},
		"another client":            {func(f url.Values) { f.Set("client_id", other.id) }, 400, "invalid_grant"},
		"unknown client":            {func(f url.Values) { f.Set("client_id", "6f0d8a57-7d5c-4a0e-9d0e-3c1b2a4d5e6f") }, 401, "invalid_client"},
		"unknown code":              {func(f url.Values) { f.Set("code", "not-a-code") }, 400, "invalid_grant"},
		"another resource":          {func(f url.Values) { f.Set("resource", "https://other.example/mcp") }, 400, "invalid_target"},
		"unsupported grant":         {func(f url.Values) { f.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
		"client credentials":        {func(f url.Values) { f.Set("grant_type", "client_credentials") }, 400, "unsupported_grant_type"},
	} {
		resp, body := exchange(c.edit)
		isOAuthError(t, name, resp, body, c.status, c.error)
	}
	resp, err := http.Post(e.url+"/oauth/token", "application/json", strings.NewReader(`{"grant_type":"authorization_code"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(readBody(t, resp)), &body)
	isOAuthError(t, "JSON body", resp, body, 400, "invalid_request")
	if after := e.rows(); after != before {
		t.Fatalf("a refused exchange wrote: %s → %s", before, after)
	}

	// The right exchange works once, read-only as chosen.
	resp, tok := exchange(func(url.Values) {})
	if resp.StatusCode != http.StatusOK || tok["token_type"] != "Bearer" || tok["expires_in"] != float64(3600) || tok["scope"] != "mcp:read" ||
		resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("exchange: %d %v", resp.StatusCode, tok)
	}
	access, refresh := tok["access_token"].(string), tok["refresh_token"].(string)
	if resp, _ := e.mcpInitialize(access, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the access token at /mcp: %d", resp.StatusCode)
	}
	s := e.mustMCP(access, "reader", nil)
	res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: "records.put", Arguments: map[string]any{"collection": "crm", "key": "acme", "value": map[string]any{}, "rationale": "the owner asked for it"}})
	if err == nil && !res.IsError {
		t.Errorf("a read-only grant ran a write")
	}
	// Replayed: refused, and what the code issued is revoked (OAuth 2.1).
	resp, body = exchange(func(url.Values) {})
	isOAuthError(t, "replayed code", resp, body, 400, "invalid_grant")
	if resp, _ := e.mcpInitialize(access, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the access token of a replayed code: %d", resp.StatusCode)
	}
	resp, body = app.refresh(refresh)
	isOAuthError(t, "the refresh token of a replayed code", resp, body, 400, "invalid_grant")
	var why string
	if err := e.pool.QueryRow(t.Context(), `SELECT data->>'reason' FROM audit_events WHERE action = 'token.revoked' AND actor_kind = 'system'`).Scan(&why); err != nil || why != "authorization code used twice" {
		t.Errorf("the revocation's audit: %q %v", why, err)
	}
	// An expired code is refused.
	q, verifier = app.request()
	code = app.approve(ana, q, url.Values{"target": {"new"}, "access": {"all"}}).Get("code")
	if _, err := e.pool.Exec(t.Context(), `UPDATE oauth_codes SET created_at = created_at - interval '6 minutes', expires_at = expires_at - interval '6 minutes' WHERE used_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	resp, body = exchange(func(url.Values) {})
	isOAuthError(t, "an expired code", resp, body, 400, "invalid_grant")
}

// A token is bound to this server's /mcp (RFC 8707): not the REST API,
// not /mcp under another name, and not past its hour.
func TestOAuth_AccessTokenWorksOnlyAtItsResourceAndUntilItExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	app := e.registerApp("Agent", "http://127.0.0.1:4000/cb")
	access, _ := app.grant(ana, url.Values{"target": {"new"}, "access": {"all"}})
	u, _ := url.Parse(e.url)
	elsewhere := "localhost:" + u.Port()
	resp, _ := e.mcpInitialize(access, elsewhere)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://`+elsewhere+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Errorf("a token for another resource: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if r, _ := e.api("GET", "/api/v1/me", access, nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the REST API: %d", r.StatusCode)
	}
	if resp, _ := e.mcpInitialize(access, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("its own resource: %d", resp.StatusCode)
	}
	// Expired (another grant, never used, so no instance believes it).
	expiring, _ := app.grant(ana, url.Values{"target": {"new"}, "access": {"all"}})
	sum := sha256.Sum256([]byte(expiring))
	if _, err := e.pool.Exec(t.Context(), `UPDATE api_tokens SET secret_expires_at = now() - interval '1 second' WHERE token_hash = $1`, sum[:]); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.mcpInitialize(expiring, "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("an expired access token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

func TestOAuth_RefreshRotatesAndAReusedRefreshTokenRevokesTheGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	app := e.registerApp("Agent", "http://127.0.0.1:4000/cb")
	access1, refresh1 := app.grant(ana, url.Values{"target": {"new"}, "access": {"all"}})
	resp, tok := app.refresh(refresh1)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "no-store" || tok["refresh_token"] == refresh1 || tok["access_token"] == access1 {
		t.Fatalf("refresh: %d %v", resp.StatusCode, tok)
	}
	access2, refresh2 := tok["access_token"].(string), tok["refresh_token"].(string)
	if resp, _ := e.mcpInitialize(access2, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the new access token: %d", resp.StatusCode)
	}
	if resp, _ := e.mcpInitialize(access1, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old access token after a refresh: %d", resp.StatusCode)
	}
	// Another client cannot use it; that refusal changes nothing.
	other := e.registerApp("Other", "http://127.0.0.1:4000/cb")
	resp, body := e.oauthToken(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh2}, "client_id": {other.id}})
	isOAuthError(t, "another client's refresh", resp, body, 400, "invalid_grant")
	// The first refresh token again: the grant ends.
	resp, body = app.refresh(refresh1)
	isOAuthError(t, "a reused refresh token", resp, body, 400, "invalid_grant")
	if resp, _ := e.mcpInitialize(access2, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the access token after the reuse: %d", resp.StatusCode)
	}
	resp, body = app.refresh(refresh2)
	isOAuthError(t, "the latest refresh token after the reuse", resp, body, 400, "invalid_grant")
	var revoked bool
	if err := e.pool.QueryRow(t.Context(), `SELECT revoked_at IS NOT NULL FROM api_tokens WHERE oauth_client_id IS NOT NULL`).Scan(&revoked); err != nil || !revoked {
		t.Errorf("the grant is not revoked: %v", err)
	}
}

func TestOAuth_GrantRevokedOnTheTokensPageEndsAccessAndRefresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ana := e.user("ana@example.com", auth.RoleMember)
	user := e.token("ana@example.com", auth.TokenUser)
	_, nb := e.api("POST", "/api/v1/notebooks", user, map[string]any{"title": "Research"})
	app := e.registerApp("Agent", "http://127.0.0.1:4000/cb")
	access, refresh := app.grant(ana, url.Values{"target": {"notebook:" + nb["id"].(string)}, "access": {"all"}})
	// A session that names no scope is bound to the notebook chosen at
	// consent.
	s := e.mustMCP(access, "researcher", nil)
	callTool(t, s, "records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"})
	if _, cells := e.api("GET", "/api/v1/notebooks/"+nb["id"].(string)+"/cells", user, nil); len(cells["cells"].([]any)) != 1 {
		t.Errorf("the call is not a cell of the notebook chosen at consent: %v", cells)
	}
	s.Close()
	_, page := ana.get("/tokens")
	if !strings.Contains(page, "notebook “Research”") {
		t.Errorf("/tokens does not show the binding")
	}
	m := regexp.MustCompile(`data-token-id="([0-9a-f-]{36})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no token row:\n%s", page)
	}
	if resp, _ := ana.postForm("/tokens/"+m[1]+"/revoke", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if resp, _ := e.mcpInitialize(access, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("access after revocation: %d", resp.StatusCode)
	}
	resp, body := app.refresh(refresh)
	isOAuthError(t, "refresh after revocation", resp, body, 400, "invalid_grant")
}

func TestOAuth_MalformedRegistrationIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	six := `["https://a.example/1","https://a.example/2","https://a.example/3","https://a.example/4","https://a.example/5","https://a.example/6"]`
	for name, c := range map[string]struct{ body, error string }{
		"no redirect URI":       {`{"client_name":"x"}`, "invalid_redirect_uri"},
		"plain http":            {`{"redirect_uris":["http://agent.example.com/cb"]}`, "invalid_redirect_uri"},
		"custom scheme":         {`{"redirect_uris":["myapp:/cb"]}`, "invalid_redirect_uri"},
		"a fragment":            {`{"redirect_uris":["https://agent.example.com/cb#x"]}`, "invalid_redirect_uri"},
		"six redirect URIs":     {`{"redirect_uris":` + six + `}`, "invalid_redirect_uri"},
		"a name of 101":         {`{"redirect_uris":["https://a.example/cb"],"client_name":"` + strings.Repeat("n", 101) + `"}`, "invalid_client_metadata"},
		"a confidential client": {`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_post"}`, "invalid_client_metadata"},
		"another grant":         {`{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}`, "invalid_client_metadata"},
		"wrong types":           {`{"redirect_uris":"https://a.example/cb"}`, "invalid_client_metadata"},
		"not an object":         {`[1,2]`, "invalid_client_metadata"},
		"too large":             {`{"redirect_uris":["https://a.example/cb"],"contacts":["` + strings.Repeat("c", 17<<10) + `"]}`, "invalid_client_metadata"},
	} {
		resp, body := e.registerClient(c.body)
		isOAuthError(t, name, resp, body, http.StatusBadRequest, c.error)
	}
	resp, err := http.Post(e.url+"/oauth/register", "text/plain", bytes.NewReader([]byte(`{"redirect_uris":["https://a.example/cb"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(readBody(t, resp)), &body)
	isOAuthError(t, "not JSON", resp, body, http.StatusBadRequest, "invalid_client_metadata")
	if rows := e.rows(); rows != "clients=0 codes=0 tokens=0 refresh=0" {
		t.Errorf("written: %s", rows)
	}
	var counted int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM rate_counters WHERE bucket LIKE 'oauth:%'").Scan(&counted); err != nil || counted != 0 {
		t.Errorf("refused registrations were counted: %d %v", counted, err)
	}
	// A good one answers what was registered, and only that.
	resp, out := e.registerClient(`{"redirect_uris":["http://localhost:6274/oauth/callback"],"client_name":"MCP Inspector","logo_uri":"https://evil.example/x.png","scope":"everything"}`)
	if resp.StatusCode != http.StatusCreated || out["client_name"] != "MCP Inspector" || out["token_endpoint_auth_method"] != "none" || out["logo_uri"] != nil ||
		out["client_secret"] != nil || fmt.Sprint(out["redirect_uris"]) != "[http://localhost:6274/oauth/callback]" {
		t.Errorf("registered: %d %v", resp.StatusCode, out)
	}
}

// Hostile bytes on the three state-changing OAuth routes are refused
// before any handler runs, and write nothing (the checks of
// TestHostileInput_EveryStateChangingRouteRefusesItAndWritesNothing).
func TestOAuth_HostileInputOnItsRoutesIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	owner.get("/tokens")
	routes := []hostileRoute{
		{"POST", "/oauth/register", `{"tool": "x", "client_name": %s, "redirect_uris": ["https://a.example/cb"]}`, false, ""},
		{"POST", "/oauth/token", "grant_type=authorization_code&client_id=%s", true, ""},
		{"POST", "/oauth/authorize", "decision=approve&client_id=%s", true, ""},
	}
	jsonCases := map[string]func(string) string{
		"a NUL escape":  func(b string) string { return fmt.Sprintf(b, `"a\u0000b"`) },
		"invalid UTF-8": func(b string) string { return fmt.Sprintf(b, "\"a\xff\xfeb\"") },
		"trailing data": func(b string) string { return fmt.Sprintf(b, `"ok"`) + ` {"x": 1}` },
		"a duplicate key": func(b string) string {
			return strings.Replace(fmt.Sprintf(b, `"ok"`), `{`, `{"tool": "y", `, 1)
		},
	}
	form := map[string]string{"a NUL": "a%00b", "invalid UTF-8": "a%FF%FEb", "a control char": "a%1Bb", "a malformed escape": "a%zzb"}
	before, rows := fingerprint(t, e), e.rows()
	for _, r := range routes {
		cases := map[string]string{}
		for name, v := range form {
			if r.form {
				cases[name] = fmt.Sprintf(r.body, v)
			}
		}
		for name, f := range jsonCases {
			if !r.form {
				cases[name] = f(r.body)
			}
		}
		for name, body := range cases {
			if status, _, resp := sendHostile(t, e, owner, r, strings.NewReader(body), int64(len(body))); status < 400 || status >= 500 {
				t.Errorf("%s %s with %s: %d %.200s", r.method, r.path, name, status, resp)
			}
		}
		big := io.MultiReader(strings.NewReader(strings.Split(r.body, "%s")[0]), bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20+10)))
		if status, _, _ := sendHostile(t, e, owner, r, big, -1); status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s chunked over the limit: %d", r.method, r.path, status)
		}
	}
	if after := fingerprint(t, e); after != before || e.rows() != rows {
		t.Errorf("hostile requests wrote: %s → %s", rows, e.rows())
	}
}
