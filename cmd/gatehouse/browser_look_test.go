//go:build e2e

package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// lookSeed is a workspace with realistic data on every main page: a
// member's conversation with cards in each state, a notebook with cells,
// an approval packet waiting for an approver.
type lookSeed struct {
	s                                 *server
	dsn                               string
	agent, user                       string
	conv, notebook, packet            string
	put, del, edited, rejected, email string
}

const (
	lookAdmin    = "dana@example.com"
	lookPassword = "the admin's password"
	lookApprover = "sam@example.com"
)

func seedLook(t *testing.T) lookSeed {
	t.Helper()
	dsn := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dsn,
		"GATEHOUSE_ADMIN_EMAIL":    lookAdmin,
		"GATEHOUSE_ADMIN_PASSWORD": lookPassword,
	})
	s.cli(t, "the approver's password\n", "user", "create", "--email", lookApprover, "--role", "approver")
	d := lookSeed{s: s, dsn: dsn}
	d.agent = strings.TrimSpace(s.cli(t, "", "token", "create", "--email", lookAdmin, "--kind", "agent", "--name", "support-assistant"))
	d.user = strings.TrimSpace(s.cli(t, "", "token", "create", "--email", lookAdmin, "--kind", "user", "--name", "dana-cli"))

	conv := postJSON(t, s.URL+"/api/v1/conversations", d.agent, map[string]any{"title": "Acme renewal"})
	d.conv = conv["id"].(string)
	base := s.URL + "/api/v1/conversations/" + d.conv
	postJSON(t, base+"/messages", d.user, map[string]any{"role": "user", "content": "Acme moved to the gold plan. Update their record, drop the old trial record and remind Ana about the renewal."})
	postJSON(t, base+"/messages", d.agent, map[string]any{"role": "assistant", "content": "I will update Acme's tier, delete the trial record and draft the reminder; each change waits for you."})
	call := func(tool string, args map[string]any, rationale, key string) string {
		body := map[string]any{"tool": tool, "arguments": args, "rationale": rationale}
		if key != "" {
			body["idempotency_key"] = key
		}
		return postJSON(t, base+"/tool-calls", d.agent, body)["proposal_id"].(string)
	}
	apply := func(id string, body map[string]any) {
		postJSON(t, s.URL+"/api/v1/proposals/"+id+"/apply", d.user, body)
	}
	d.edited = call("records.put", map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "silver", "seats": 40}},
		"Acme's plan changed; the CRM should say so", "")
	apply(d.edited, map[string]any{"arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold", "seats": 40}}})
	trial := call("records.put", map[string]any{"collection": "clients", "key": "acme-trial", "value": map[string]any{"tier": "trial"}},
		"keep the trial record until the switch is done", "")
	apply(trial, map[string]any{})
	d.rejected = call("records.put", map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "platinum"}},
		"the user may want platinum next year", "")
	postJSON(t, s.URL+"/api/v1/proposals/"+d.rejected+"/reject", d.user, map[string]any{"reason": "Not decided yet: keep gold."})
	d.put = call("notes.append", map[string]any{"collection": "clients", "key": "acme", "text": "Renewal call booked for Monday."},
		"log the call we just booked", "note-acme-renewal-0001")
	d.del = call("records.delete", map[string]any{"collection": "clients", "key": "acme-trial"}, "the trial record is obsolete now that Acme pays", "delete-acme-trial-0001")
	email := postJSON(t, base+"/tool-calls", d.agent, map[string]any{"tool": "email.send",
		"arguments": map[string]any{"to": "ana@acme.example", "subject": "Your renewal", "body": "Hi Ana, your gold plan renews on the 1st. Reply if anything changes."},
		"rationale": "the user asked to remind Ana about the renewal", "idempotency_key": "email-ana-renewal-0001"})
	d.email, d.packet = email["proposal_id"].(string), email["approval_id"].(string)

	nb := postJSON(t, s.URL+"/api/v1/notebooks", d.agent, map[string]any{"title": "Client cleanup"})
	d.notebook = nb["id"].(string)
	nbase := s.URL + "/api/v1/notebooks/" + d.notebook
	postJSON(t, nbase+"/tool-calls", d.agent, map[string]any{"tool": "records.search", "arguments": map[string]any{"query": "acme", "collection": "clients"},
		"rationale": "see which client records exist"})
	postJSON(t, nbase+"/tool-calls", d.agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "globex", "value": map[string]any{"tier": "bronze"}}, "rationale": "Globex signed up yesterday"})
	return d
}

// autoApproveHighRisk turns the workspace's auto_approve_high_risk on. The
// built-in deletes are high risk (ADR-036), so by default an approver
// decides them; a test of the owner's own card for a delete, or of an
// autonomous notebook running one, needs the scope alone to hold them.
func autoApproveHighRisk(t *testing.T, dsn string) {
	t.Helper()
	execSQL(t, dsn, "UPDATE workspaces SET auto_approve_high_risk = true")
}

// execSQL runs one statement on the test's database.
func execSQL(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// forgetRates empties the rate counters: for a test that proposes a
// second delete within the minute with the same token, more than the
// irreversible class's default (one a minute per agent) allows.
func forgetRates(t *testing.T, dsn string) {
	t.Helper()
	execSQL(t, dsn, "DELETE FROM rate_counters")
}

// signedIn is a browser signed in as the workspace admin.
func (d lookSeed) signedIn(t *testing.T) context.Context {
	t.Helper()
	ctx := browser(t)
	signInBrowser(t, ctx, d.s.URL, lookAdmin, lookPassword)
	return ctx
}

// On a conversation card for records.delete, Approve opens the second
// confirmation: cancelling (Esc) leaves the call waiting, confirming runs it.
func TestBrowser_DestructiveApproveNeedsTheSecondConfirmation(t *testing.T) {
	d := seedLook(t)
	ctx := d.signedIn(t)
	// The seed's delete waits for an approver (high risk); with high risk
	// auto-approved, a new one waits on the owner's card.
	autoApproveHighRisk(t, d.dsn)
	forgetRates(t, d.dsn) // the seed made a delete a moment ago
	del := postJSON(t, d.s.URL+"/api/v1/conversations/"+d.conv+"/tool-calls", d.agent, map[string]any{"tool": "records.delete",
		"arguments": map[string]any{"collection": "clients", "key": "acme-trial"}, "rationale": "the trial record is obsolete now that Acme pays",
		"idempotency_key": "delete-acme-trial-0002"})["proposal_id"].(string)
	card := "#proposal-" + del
	step(t, ctx, "open the dialog",
		chromedp.Navigate(d.s.URL+"/conversations/"+d.conv),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-status=pending] [data-testid=approve]`)),
		chromedp.Click(chromedp.CSS(card+` [data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=irreversible-dialog]`)),
	)
	if got := mustText(t, ctx, `[data-testid=irreversible-dialog]`); !strings.Contains(got, "records.delete destroys data") || !strings.Contains(got, "cannot be restored") {
		t.Fatalf("the dialog says %q", got)
	}
	// Times read relative, with the absolute time (the viewer's zone) on
	// hover.
	tm, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const el = document.querySelector('`+card+` [data-testid=proposed-by] time');
		return {text: el.textContent, title: el.title, datetime: el.getAttribute('datetime')};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if txt, _ := tm["text"].(string); (txt != "just now" && !strings.HasSuffix(txt, " ago")) || tm["title"] == "" || tm["datetime"] == "" {
		t.Fatalf("the card's time: %v", tm)
	}
	// Labelled, and focus starts inside it on the safe choice.
	state, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
		const d = document.querySelector('[data-testid=irreversible-dialog]');
		return {modal: d.matches(':modal'), label: document.getElementById(d.getAttribute('aria-labelledby')).textContent,
			focus: document.activeElement.dataset.testid};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if state["modal"] != true || state["label"] != "This cannot be undone" || state["focus"] != "irreversible-cancel" {
		t.Fatalf("dialog state %v", state)
	}
	// Esc cancels: nothing was sent, the card still waits.
	step(t, ctx, "cancel with Esc",
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.CSS(`[data-testid=irreversible-dialog]`)),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-status=pending] [data-testid=approve]`)),
	)
	if status, p := getJSON(t, d.s.URL+"/api/v1/proposals/"+del, d.agent); status != http.StatusOK || p["status"] != "pending" {
		t.Fatalf("after cancelling the delete is %d %v", status, p["status"])
	}
	// Confirm: the call runs and the card says who approved it. Asked
	// again at once after a Cancel (a quick second click), the Confirm
	// counts: the Cancel's dialog "close" event, which comes a task later,
	// once settled the new question as a no and left its Confirm doing
	// nothing.
	step(t, ctx, "cancel, ask again at once, confirm",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const approve = document.querySelector('`+card+` [data-testid=approve]');
			approve.click();
			document.querySelector('[data-testid=irreversible-cancel]').click();
			approve.click();
			setTimeout(() => document.querySelector('[data-testid=irreversible-confirm]').click(), 50);
		})()`),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-status=applied] [data-testid=result]`)),
	)
	if got := mustText(t, ctx, card+` [data-testid=decided-by]`); !strings.Contains(got, "Approved by "+lookAdmin) {
		t.Fatalf("decided line %q", got)
	}
	if status, p := getJSON(t, d.s.URL+"/api/v1/proposals/"+del, d.agent); status != http.StatusOK || p["status"] != "applied" {
		t.Fatalf("after confirming the delete is %d %v", status, p["status"])
	}

	// In an autonomous notebook a new cell runs at once: adding a delete
	// asks first (a form whose tool cannot be undone), cancelling adds
	// nothing, confirming adds and runs it.
	step(t, ctx, "trust autonomous",
		chromedp.Navigate(d.s.URL+"/notebooks/"+d.notebook),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=trust-autonomous]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=trust-autonomous]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="trust-current"][text()="autonomous"]`)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=cell-tool]`)),
	)
	pickTool(t, ctx, "records.delete")
	step(t, ctx, "add a delete: cancel",
		chromedp.SendKeys(chromedp.CSS(`#add-cell [name="arg.collection"]`), "clients"),
		chromedp.SendKeys(chromedp.CSS(`#add-cell [name="arg.key"]`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=cell-rationale]`), "Acme's record goes"),
		chromedp.Click(chromedp.CSS(`[data-testid=add-cell-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=irreversible-dialog]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=irreversible-cancel]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`[data-testid=irreversible-dialog]`)),
	)
	if got := mustText(t, ctx, `[data-testid=cells]`); strings.Contains(got, "records.delete") {
		t.Fatalf("a cancelled cell was added: %q", got)
	}
	step(t, ctx, "add a delete: confirm",
		chromedp.Click(chromedp.CSS(`[data-testid=add-cell-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=irreversible-confirm]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=irreversible-confirm]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-tool="records.delete"][data-status=applied] [data-testid=result]`)),
	)
}

// lookPages are the pages every accessibility and layout check visits.
func (d lookSeed) pages() []struct{ name, path, ready string } {
	return []struct{ name, path, ready string }{
		{"home", "/", "main"},
		{"conversations", "/conversations", "[data-testid=conversations]"},
		{"conversation", "/conversations/" + d.conv, "[data-testid=proposal-card]"},
		{"notebooks", "/notebooks", "[data-testid=notebooks]"},
		{"notebook", "/notebooks/" + d.notebook, "[data-testid=proposal-card]"},
		{"approvals", "/admin/approvals", "main"},
		{"packet", "/admin/approvals/" + d.packet, "main"},
		{"tools", "/tools", "[data-testid=tool]"},
		{"tokens", "/tokens", "[data-testid=my-tokens]"},
		{"notifications", "/settings/notifications", "[data-testid=notification-settings]"},
		{"trust", "/trust", "main"},
		{"settings", "/admin/settings", "main"},
		{"admin", "/admin", "[data-testid=policy-status]"},
		{"policy", "/admin/policy", "[data-testid=shadow-rules]"},
		{"receipts", "/admin/receipts", "main"},
		{"audit", "/audit?object=" + d.del, "main"},
		{"404", "/no/such/page", "[data-testid=not-found]"},
	}
}

// At 390 × 844 no page scrolls sideways.
func TestBrowser_PhoneHasNoHorizontalScroll(t *testing.T) {
	d := seedLook(t)
	ctx := d.signedIn(t)
	// Not emulated as "mobile": a mobile viewport zooms out to fit wide
	// content, which would hide the overflow this test looks for. 390 × 844
	// is the phone the issue names; 360 the narrowest we support.
	for _, width := range []int64{390, 360} {
		step(t, ctx, "phone viewport", chromedp.EmulateViewport(width, 844))
		for _, p := range d.pages() {
			switch p.name {
			case "home", "conversation", "notebook", "approvals", "packet", "tools", "tokens", "trust":
			default:
				continue
			}
			step(t, ctx, "open "+p.name, chromedp.Navigate(d.s.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
			m, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(() => {
				const wide = [];
				document.querySelectorAll('body *').forEach(el => {
					const r = el.getBoundingClientRect();
					if (r.right > innerWidth + 1 && getComputedStyle(el).position !== 'fixed' && !el.closest('.table-wrap, .table, pre, .site-nav, dialog'))
						wide.push(el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).replace(/ /g, '.') : '') + ' ' + Math.round(r.right));
				});
				return {scroll: document.documentElement.scrollWidth, inner: innerWidth, wide: wide.slice(0, 5)};
			})()`))
			if err != nil {
				t.Fatal(err)
			}
			if m["inner"].(float64) != float64(width) {
				t.Fatalf("the viewport is %v px wide, want %d", m["inner"], width)
			}
			if m["scroll"].(float64) > m["inner"].(float64) {
				t.Errorf("%s scrolls sideways at %d px: scrollWidth %v > innerWidth %v; too wide: %v", p.name, width, m["scroll"], m["inner"], m["wide"])
			}
		}
	}
}

// make screenshots: GATEHOUSE_SCREENSHOTS=<folder> writes PNGs of the main
// pages, light theme, and the inbox in the dark theme too.
func TestBrowser_Screenshots(t *testing.T) {
	dir := os.Getenv("GATEHOUSE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set GATEHOUSE_SCREENSHOTS to a folder (make screenshots)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := seedLook(t)
	ctx := d.signedIn(t)
	shots := []struct {
		file, path, ready, theme string
	}{
		{"home.png", "/", "main", "light"},
		{"conversation.png", "/conversations/" + d.conv + "#proposal-" + d.put, "[data-testid=proposal-card]", "light"},
		{"notebook.png", "/notebooks/" + d.notebook, "[data-testid=proposal-card]", "light"},
		{"inbox.png", "/admin/approvals/" + d.packet, "main", "light"},
		{"trust.png", "/trust", "main", "light"},
		{"inbox-dark.png", "/admin/approvals/" + d.packet, "main", "dark"},
		{"conversation-dark.png", "/conversations/" + d.conv, "[data-testid=proposal-card]", "dark"},
	}
	step(t, ctx, "desktop viewport", chromedp.EmulateViewport(1280, 800))
	for _, sh := range shots {
		var png []byte
		step(t, ctx, sh.file,
			colorScheme(sh.theme),
			chromedp.Navigate(d.s.URL+sh.path),
			chromedp.WaitVisible(chromedp.CSS(sh.ready)),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				var err error
				png, err = chromedp.CaptureScreenshot()(ctx, tg)
				return err
			}),
		)
		if err := os.WriteFile(filepath.Join(dir, sh.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(dir, sh.file), len(png))
	}
}

// colorScheme emulates prefers-color-scheme: light or dark.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// /admin/receipts lists the latest receipts without their contents;
// opening a row fetches its content into the row.
func TestBrowser_AReceiptsContentComesWhenItsRowIsOpened(t *testing.T) {
	d := seedLook(t)
	ctx := d.signedIn(t)
	first := `[data-testid=receipts] tbody tr:first-child`
	step(t, ctx, "open a receipt's content",
		chromedp.Navigate(d.s.URL+"/admin/receipts"),
		chromedp.WaitVisible(chromedp.CSS(first+` details summary`)),
		chromedp.Click(chromedp.CSS(first+` details summary`)),
		chromedp.WaitVisible(chromedp.Search(`//tbody/tr[1]//pre[@data-testid="receipt-content"][contains(., '"outcome"')]`)),
	)
}
