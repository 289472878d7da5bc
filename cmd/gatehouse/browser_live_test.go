//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// countStreamOpens makes every page the browser opens count its live
// streams' (re)connections in window.__sseOpens, and mark itself with
// window.__loaded, so a test can wait until a page follows its events
// and tell that it was never reloaded.
func countStreamOpens(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__sseOpens = 0; window.__loaded = Math.random();
			document.addEventListener('htmx:sseOpen', function () { window.__sseOpens++; });`})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
}

// waitFollowing waits until the page's stream is open, and returns the
// page's mark.
func waitFollowing(t *testing.T, ctx context.Context, name string) float64 {
	t.Helper()
	step(t, ctx, name+": stream open", chromedp.Poll[chromedp.Void](`window.__sseOpens > 0`, chromedp.WithPollingTimeout(15*time.Second)))
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__loaded`))
	if err != nil {
		t.Fatal(err)
	}
	return mark
}

// sameDocument fails the test if the page was reloaded since mark.
func sameDocument(t *testing.T, ctx context.Context, mark float64) {
	t.Helper()
	now, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__loaded`))
	if err != nil {
		t.Fatal(err)
	}
	if now != mark {
		t.Fatal("the page was reloaded; it should have updated in place")
	}
}

func patchJSON(t *testing.T, url, token string, body any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPatch, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH %s: %d", url, resp.StatusCode)
	}
}

// A page open on one instance follows what an agent does through
// another: cards appear and change on the conversation, cells appear on
// the notebook, and home and the header's count follow what waits.
func TestBrowser_LivePagesFollowAnotherInstance(t *testing.T) {
	env := map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	}
	s := startServer(t, env)
	other := startServer(t, maps.Clone(env))
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	owner := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "user", "--name", "script"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Clients"})
	nb := postJSON(t, s.URL+"/api/v1/notebooks", agent, map[string]any{"title": "Cleanup"})
	convID, nbID := conv["id"].(string), nb["id"].(string)

	ctx := browser(t)
	countStreamOpens(t, ctx)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")

	// Home: nothing waits yet.
	step(t, ctx, "home", chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=no-waiting-cards]`)))
	mark := waitFollowing(t, ctx, "home")
	if got := mustText(t, ctx, `[data-testid=nav-count]`); got != "0" {
		t.Fatalf("the header counts %q before anything waits", got)
	}
	put := postJSON(t, other.URL+"/api/v1/conversations/"+convID+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold"}}, "rationale": "the user said Acme is gold"})
	step(t, ctx, "home shows the waiting card",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=waiting-card] a[href$="#proposal-`+put["proposal_id"].(string)+`"]`)),
		chromedp.WaitVisible(chromedp.Search(`//a[@id="nav-counts"][@data-cards="1"]`)),
	)
	sameDocument(t, ctx, mark)
	if got := mustText(t, ctx, `[data-testid=nav-count]`); got != "1" {
		t.Fatalf("the header counts %q, want 1", got)
	}

	// The conversation: a new card appears, and changes when resolved
	// elsewhere.
	step(t, ctx, "conversation", chromedp.Navigate(s.URL+"/conversations/"+convID),
		chromedp.WaitVisible(chromedp.CSS(`#proposal-`+put["proposal_id"].(string))))
	mark = waitFollowing(t, ctx, "conversation")
	second := postJSON(t, other.URL+"/api/v1/conversations/"+convID+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "bolt", "value": map[string]any{"tier": "silver"}}, "rationale": "the user said Bolt is silver"})
	secondCard := `#proposal-` + second["proposal_id"].(string)
	step(t, ctx, "the agent's card appears", chromedp.WaitVisible(chromedp.CSS(secondCard+`[data-status=pending]`)))
	postJSON(t, other.URL+"/api/v1/proposals/"+put["proposal_id"].(string)+"/apply", owner, map[string]any{})
	step(t, ctx, "the card applied elsewhere updates",
		chromedp.WaitVisible(chromedp.CSS(`#proposal-`+put["proposal_id"].(string)+`[data-status=applied] [data-testid=result]`)))
	postJSON(t, other.URL+"/api/v1/conversations/"+convID+"/messages", agent, map[string]any{"role": "assistant", "content": "Done with Acme."})
	step(t, ctx, "the agent's message appears", chromedp.WaitVisible(chromedp.Search(`//ol[@id="transcript"]/li[contains(., "Done with Acme.")]`)))
	// The owner's script switches the mode on the other instance: the
	// header follows.
	patchJSON(t, other.URL+"/api/v1/conversations/"+convID, owner, map[string]any{"permission_mode": "auto"})
	step(t, ctx, "the mode changed elsewhere shows", chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="mode-current"][text()="auto"]`)))
	sameDocument(t, ctx, mark)
	cards, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=proposal-card]').length`))
	if err != nil || cards != 2 {
		t.Fatalf("the page shows %d cards, want 2 (%v)", cards, err)
	}

	// The notebook: an agent's cell appears.
	step(t, ctx, "notebook", chromedp.Navigate(s.URL+"/notebooks/"+nbID), chromedp.WaitVisible(chromedp.CSS(`[data-testid=cells]`)))
	mark = waitFollowing(t, ctx, "notebook")
	cell := postJSON(t, other.URL+"/api/v1/notebooks/"+nbID+"/tool-calls", agent, map[string]any{"tool": "records.search",
		"arguments": map[string]any{"query": "acme"}, "rationale": "look the client up first"})
	step(t, ctx, "the agent's cell appears",
		chromedp.WaitVisible(chromedp.CSS(`#cell-`+cell["proposal_id"].(string)+` [data-status=applied] [data-testid=result]`)))
	sameDocument(t, ctx, mark)
}
