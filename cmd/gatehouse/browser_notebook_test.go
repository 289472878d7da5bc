//go:build e2e

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The owner sets a notebook to trusted: a mutating cell runs without
// asking, a destructive cell still asks, and Run performs it.
func TestBrowser_TrustedNotebookRunsChangesAndAsksForDeletes(t *testing.T) {
	dsn := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dsn,
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	// records.delete is high risk: auto-approved here, so the trust level
	// alone decides who runs it.
	autoApproveHighRisk(t, dsn)

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")

	// Start a notebook from the page; it is cautious. Set it to trusted; a
	// reload shows what the row stores.
	step(t, ctx, "set trusted",
		chromedp.Navigate(s.URL+"/notebooks"),
		chromedp.SendKeys(chromedp.CSS(`input[name=title]`), "Client cleanup"),
		chromedp.Click(chromedp.CSS(`form[action="/notebooks"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="trust-current"][text()="cautious"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=trust-trusted]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="trust-current"][text()="trusted"]`)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=trust-current]`)),
	)
	if got := mustText(t, ctx, `[data-testid=trust-current]`); got != "trusted" {
		t.Fatalf("after reload the header shows %q, want trusted", got)
	}
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	notebookID := url[strings.LastIndex(url, "/")+1:]

	// A mutating cell from the form runs without asking.
	pickTool(t, ctx, "records.put")
	step(t, ctx, "mutating cell",
		chromedp.SendKeys(chromedp.CSS(`[name="arg.collection"]`), "clients"),
		chromedp.SendKeys(chromedp.CSS(`[name="arg.key"]`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`[name="arg.value"]`), `{"tier": "gold"}`),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=cell-rationale]`), "record the new tier"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-cell-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="records.put"][data-status=applied] [data-testid=result]`)),
	)
	if got := mustText(t, ctx, `[data-tool="records.put"] [data-testid=result]`); !strings.Contains(got, "gold") {
		t.Fatalf("the postflight shows %q", got)
	}

	// A destructive cell from the form asks: "Run this?".
	pickTool(t, ctx, "records.delete")
	step(t, ctx, "destructive cell",
		chromedp.SendKeys(chromedp.CSS(`#add-cell [name="arg.collection"]`), "clients"),
		chromedp.SendKeys(chromedp.CSS(`#add-cell [name="arg.key"]`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=cell-rationale]`), "acme left us"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-cell-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="records.delete"][data-status=pending] [data-testid=approve]`)),
	)
	if got := mustText(t, ctx, `[data-tool="records.delete"] .ask`); got != "Run this?" {
		t.Fatalf("the destructive cell says %q", got)
	}

	// An agent's cell appears without a reload: a mutating one runs.
	postJSON(t, s.URL+"/api/v1/notebooks/"+notebookID+"/tool-calls", agent, map[string]any{"tool": "notes.append",
		"arguments": map[string]any{"collection": "clients", "key": "acme", "text": "called on Monday"}, "rationale": "log the call we just had",
		"idempotency_key": "note-acme-monday-0001"})
	step(t, ctx, "agent cell and run",
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="notes.append"][data-status=applied]`)),
		// Run the delete (it cannot be undone: confirm a second time); its
		// postflight replaces the buttons.
		chromedp.Click(chromedp.CSS(`[data-tool="records.delete"] [data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=irreversible-confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=irreversible-confirm]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="records.delete"][data-status=applied] [data-testid=result]`)),
	)
	if got := mustText(t, ctx, `[data-tool="records.delete"] [data-testid=result]`); !strings.Contains(got, "deleted") {
		t.Fatalf("the delete's postflight shows %q", got)
	}
}

// pickTool chooses a tool in the add-cell form, as a person does (the
// change event fetches its fields), and waits for its fields.
func pickTool(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`(() => {
		const s = document.querySelector('[data-testid=cell-tool]');
		s.value = '`+name+`';
		s.dispatchEvent(new Event('change', {bubbles: true}));
	})()`)); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "pick "+name, chromedp.WaitVisible(chromedp.CSS(`#cell-fields [data-tool="`+name+`"]`)))
}
