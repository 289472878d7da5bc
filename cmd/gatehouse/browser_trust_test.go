//go:build e2e

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// A signed-in user opens /trust and finds the posterior of a class with
// evidence drawn as an accessible chart: an SVG image whose title names
// the class and its numbers.
func TestBrowser_TrustPageDrawsThePosterior(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	s.cli(t, "the member's password\n", "user", "create", "--email", "ana@example.com", "--role", "member")
	user := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "ana's script"))
	connector := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "mail", "--connector"))
	for _, label := range []string{"approved", "approved", "minor_edit", "edited"} {
		postJSON(t, s.URL+"/api/v1/evidence", user, map[string]any{"action_class": "draft.compose", "label": label})
	}
	if ev := postJSON(t, s.URL+"/api/v1/evidence", connector, map[string]any{"action_class": "draft.compose", "label": "sent"}); ev["provenance"] != "connector" {
		t.Fatalf("the connector's evidence: %v", ev)
	}

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "ana@example.com", "the member's password")
	chart := `[data-class="draft.compose"] svg[role=img][data-testid=density-chart]`
	step(t, ctx, "open /trust from the header",
		chromedp.Click(chromedp.Search(`//nav//a[normalize-space(.)="Trust"]`)),
		chromedp.WaitVisible(chromedp.CSS(chart)),
	)
	title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const svg = document.querySelector('`+chart+`');
		const ids = svg.getAttribute('aria-labelledby').split(' ');
		return document.getElementById(ids[0]).textContent + ' | ' + svg.querySelector('title').textContent;
	})()`))
	if err != nil {
		failWithPage(t, ctx, "read the chart's title", err)
	}
	if !strings.Contains(title, "draft.compose: posterior Beta(") || !strings.Contains(title, "95 % interval") || !strings.Contains(title, "5 samples, learning") {
		t.Fatalf("the chart's accessible name: %q", title)
	}
	if tier := mustText(t, ctx, `[data-class="draft.compose"] [data-testid=tier]`); tier != "learning" {
		t.Fatalf("tier badge %q", tier)
	}
	// The curve is drawn: a path with ~100 points, and the interval's band.
	points, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector('`+chart+` path.curve').getAttribute('d').split('L').length`))
	if err != nil || points < 100 {
		t.Fatalf("the curve has %d points (%v)", points, err)
	}
	if shot := os.Getenv("TRUST_SCREENSHOT"); shot != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(shot, png, 0o644)
		}
	}
}
