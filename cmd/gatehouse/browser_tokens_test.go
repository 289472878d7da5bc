//go:build e2e

package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// A signed-in user opens /tokens from the header, creates a read-only
// agent token, sees its secret once (it works on the API), finds it gone
// when the page is loaded again, and revokes the token.
func TestBrowser_UserCreatesSeesOnceAndRevokesAToken(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	s.cli(t, "the member's password\n", "user", "create", "--email", "ana@example.com", "--role", "member")

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "ana@example.com", "the member's password")
	step(t, ctx, "open /tokens from the header",
		chromedp.Click(chromedp.Search(`//nav//a[normalize-space(.)="Tokens"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=create-token]`)),
	)
	step(t, ctx, "create a read-only agent token",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=token-name]`), "my reader"),
		chromedp.Click(chromedp.CSS(`[data-testid=token-read-only]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=token-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=token-secret]`)),
	)
	secret := mustText(t, ctx, `[data-testid=token-secret]`)
	if !strings.HasPrefix(secret, "gh_a_") {
		t.Fatalf("secret %q", secret)
	}
	if status, me := getJSON(t, s.URL+"/api/v1/me", secret); status != http.StatusOK || me["email"] != "ana@example.com" {
		t.Fatalf("the new token: %d %v", status, me)
	}
	if row := mustText(t, ctx, `[data-testid=my-tokens] [data-testid=token-row]`); !strings.Contains(row, "my reader") || !strings.Contains(row, "read-only") || !strings.Contains(row, "live") {
		t.Fatalf("the token's row: %q", row)
	}

	// Shown once: loading the page again does not show it.
	step(t, ctx, "load /tokens again",
		chromedp.Navigate(s.URL+"/tokens"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=my-tokens] [data-testid=token-row]`)),
	)
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`main`)))
	if err != nil {
		failWithPage(t, ctx, "read the page", err)
	}
	if strings.Contains(html, secret) || strings.Contains(html, "token-secret") {
		t.Fatal("the secret is shown again")
	}

	step(t, ctx, "revoke the token",
		chromedp.Click(chromedp.CSS(`[data-testid=my-tokens] [data-testid=revoke-token]`)),
		chromedp.WaitVisible(chromedp.Search(`//td[@data-testid="token-status"][starts-with(normalize-space(.), "revoked")]`)),
	)
	if status, _ := getJSON(t, s.URL+"/api/v1/me", secret); status != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", status)
	}
}
