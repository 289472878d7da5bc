//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// An MCP client asks to connect: the signed-in person opens its
// authorization URL, sees the client (marked unverified) and where they
// will be sent back, picks one of their conversations and read-only
// access on a phone-wide page, allows it, and lands on the client's
// redirect URI (a local listener) with a code that the client exchanges.
func TestBrowser_OAuthConsentApprovesAndLandsOnTheRedirectURIWithACode(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	s.cli(t, "the member's password\n", "user", "create", "--email", "ana@example.com", "--role", "member")
	user := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "setup"))
	convID := postJSON(t, s.URL+"/api/v1/conversations", user, map[string]any{"title": "Customer calls"})["id"].(string)

	// The client's redirect target: a tiny listener that keeps what it got.
	var mu sync.Mutex
	var got url.Values
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser's favicon
			return
		}
		mu.Lock()
		got = r.URL.Query()
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Connected</title><p id="done">Connected.</p>`)
	}))
	defer listener.Close()
	redirect := listener.URL + "/callback"
	client := postJSON(t, s.URL+"/oauth/register", "", map[string]any{"client_name": "Desk Agent", "redirect_uris": []string{redirect}})
	clientID := client["client_id"].(string)
	verifier := oauth2.GenerateVerifier()
	authorize := s.URL + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"state": {"browser-state"}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"},
		"resource": {s.URL + "/mcp"}}.Encode()

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "ana@example.com", "the member's password")
	step(t, ctx, "open the authorization URL at phone width",
		chromedp.EmulateViewport(360, 800),
		chromedp.Navigate(authorize),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=oauth-consent]`)),
	)
	if name := mustText(t, ctx, `[data-testid=oauth-client-name]`); name != "Desk Agent" {
		t.Errorf("client name %q", name)
	}
	if mark := mustText(t, ctx, `[data-testid=oauth-unverified]`); mark != "unverified" {
		t.Errorf("the name is not marked unverified: %q", mark)
	}
	if host := mustText(t, ctx, `[data-testid=oauth-redirect-host]`); host != strings.TrimPrefix(listener.URL, "http://") {
		t.Errorf("redirect host %q", host)
	}
	if h1 := mustText(t, ctx, `h1`); h1 == "" {
		t.Error("no heading")
	}
	options, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=oauth-target] option')].map(o => o.value + '=' + o.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(options) != 2 || !strings.HasPrefix(options[0], "new=") || options[1] != "conversation:"+convID+"=Customer calls" {
		t.Errorf("the choices: %v", options)
	}
	// Every control has its label.
	unlabelled, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('main select, main input:not([type=hidden]), main button')]
		.filter(el => !(el.labels && el.labels.length) && !el.textContent.trim() && !el.getAttribute('aria-label')).length`))
	if err != nil || unlabelled != 0 {
		t.Errorf("controls without a label: %d %v", unlabelled, err)
	}
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > innerWidth`))
	if err != nil || wide {
		culprits, _ := chromedp.Run(ctx, chromedp.Evaluate[string](overflowCulprits))
		t.Errorf("the consent page scrolls sideways at 360 px: %v %s", err, culprits)
	}

	step(t, ctx, "choose the conversation and read-only, and allow",
		chromedp.SetValue(chromedp.CSS(`[data-testid=oauth-target]`), "conversation:"+convID),
		chromedp.Click(chromedp.CSS(`[data-testid=oauth-access-read]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=oauth-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`#done`)),
	)
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasPrefix(location, redirect+"?") {
		t.Fatalf("landed on %q (%v)", location, err)
	}
	mu.Lock()
	q := got
	mu.Unlock()
	if q.Get("code") == "" || q.Get("state") != "browser-state" || q.Get("iss") != s.URL || q.Get("error") != "" {
		t.Fatalf("the redirect carried %v", q)
	}

	// The client exchanges the code: a read-only token for /mcp.
	resp, err := http.PostForm(s.URL+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {q.Get("code")}, "redirect_uri": {redirect},
		"client_id": {clientID}, "code_verifier": {verifier}, "resource": {s.URL + "/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || tok["scope"] != "mcp:read" || !strings.HasPrefix(fmt.Sprint(tok["access_token"]), "gh_o_") {
		t.Fatalf("exchange: %d %v", resp.StatusCode, tok["error"])
	}
	if status, _ := getJSON(t, s.URL+"/api/v1/me", tok["access_token"].(string)); status != http.StatusUnauthorized {
		t.Errorf("the MCP token on the REST API: %d", status)
	}

	// The grant is on /tokens, with its client.
	step(t, ctx, "see the grant on /tokens",
		chromedp.Navigate(s.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=token-oauth]`)),
	)
	if row := mustText(t, ctx, `[data-testid=my-tokens] [data-testid=token-row]`); !strings.Contains(row, "OAuth: Desk Agent") || !strings.Contains(row, "Customer calls") {
		t.Errorf("the grant's row: %q", row)
	}
}
