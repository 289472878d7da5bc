//go:build e2e

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The owner approves a card with "allow similar for 30 minutes, 3 calls":
// the call runs, the conversation's header says a grant is active, and
// the agent's next similar call runs without a card.
func TestBrowser_ApproveAndAllowSimilarThenTheNextCallRunsWithoutACard(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Clients"})
	base := s.URL + "/api/v1/conversations/" + conv["id"].(string)
	put := func(key string) map[string]any {
		return postJSON(t, base+"/tool-calls", agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "clients", "key": key, "value": map[string]any{"tier": "gold"}}, "rationale": "the user said it is gold"})
	}
	first := put("acme")
	if first["status"] != "pending" {
		t.Fatalf("the first call: %v", first)
	}

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	card := `#proposal-` + first["proposal_id"].(string)
	step(t, ctx, "approve and allow similar",
		chromedp.Navigate(s.URL+"/conversations/"+conv["id"].(string)),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-testid=allow-similar] summary`)),
		chromedp.Click(chromedp.CSS(card+` [data-testid=allow-similar] summary`)),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-testid=grant-minutes]`)),
	)
	seriousAxe(t, ctx, "the card's allow-similar form")
	step(t, ctx, "choose 30 minutes, 3 calls",
		chromedp.SetValue(chromedp.CSS(card+` [data-testid=grant-minutes]`), "30"),
		chromedp.SetValue(chromedp.CSS(card+` [data-testid=grant-calls]`), "3"),
		chromedp.Click(chromedp.CSS(card+` [data-testid=approve-and-grant]`)),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-testid=result]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=grants-active]`)),
	)
	if got := mustText(t, ctx, `[data-testid=grants-active]`); got != "1 grant active" {
		t.Fatalf("the header says %q", got)
	}

	// The next similar call runs at once: no card waits for anyone.
	next := put("globex")
	if next["status"] != "applied" || next["decision"].(map[string]any)["disposition"] != "grant" {
		t.Fatalf("the next call: %v", next)
	}
	nextCard := `#proposal-` + next["proposal_id"].(string)
	step(t, ctx, "the next call in the transcript",
		chromedp.WaitVisible(chromedp.CSS(nextCard+` [data-testid=decided-by]`)),
	)
	if got := mustText(t, ctx, nextCard+` [data-testid=decided-by]`); !strings.HasPrefix(got, "Ran under a grant by root@example.com") {
		t.Fatalf("the next call's card says %q", got)
	}
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('`+nextCard+` [data-testid=approve]').length`))
	if err != nil || buttons != 0 {
		t.Fatalf("the next call shows %d approve buttons (%v)", buttons, err)
	}
	// The header's link opens the grants, with 2 of 3 calls left.
	clickLive(t, ctx, "open the grants", `[data-testid=grants-active]`)
	step(t, ctx, "the grants", chromedp.WaitVisible(chromedp.CSS(`[data-testid=grant-row]`)))
	deadline := time.Now().Add(5 * time.Second)
	for got := mustText(t, ctx, `[data-testid=grant-remaining]`); got != "2 of 3"; got = mustText(t, ctx, `[data-testid=grant-remaining]`) {
		if time.Now().After(deadline) {
			t.Fatalf("the grant shows %q left", got)
		}
		time.Sleep(200 * time.Millisecond)
		step(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid=grant-row]`)))
	}
	seriousAxe(t, ctx, "the grants page")
}

// seriousAxe fails on axe-core's serious and critical violations of the
// page ctx shows.
func seriousAxe(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, v := range axeCheck(t, ctx, name) {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: %s %s: %s (%d nodes)", name, v.Impact, v.ID, v.Help, len(v.Nodes))
		}
	}
}
