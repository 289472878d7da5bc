//go:build e2e

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// An approver triages packets with the keyboard in the live queue, and the
// conversation the call came from shows the result without a reload.
func TestBrowser_ApproverTriagesWithTheKeyboard(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	s.cli(t, "the approver's password\n", "user", "create", "--email", "boss@example.com", "--role", "approver")
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Renewals"})
	send := func(to, subject, key string) map[string]any {
		p := postJSON(t, s.URL+"/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "email.send",
			"arguments": map[string]any{"to": to, "subject": subject, "body": "Your plan renews next month."},
			"rationale": "the client asked for a reminder", "idempotency_key": key})
		if p["status"] != "pending_approval" {
			t.Fatalf("email.send: %v", p)
		}
		return p
	}
	first := send("ana@example.net", "Renewal reminder", "email-ana-000000001")

	// The owner watches the conversation: the card waits for an approver.
	owner := browser(t)
	signInBrowser(t, owner, s.URL, "root@example.com", "the admin's password")
	card := "#proposal-" + first["proposal_id"].(string)
	step(t, owner, "owner opens the conversation",
		chromedp.Navigate(s.URL+"/conversations/"+conv["id"].(string)),
		chromedp.WaitVisible(chromedp.CSS(card+" [data-testid=awaiting-approval]")),
	)

	// The approver opens the queue and approves with j, a.
	approver := browser(t)
	signInBrowser(t, approver, s.URL, "boss@example.com", "the approver's password")
	step(t, approver, "approve with the keyboard",
		chromedp.Navigate(s.URL+"/admin/approvals"),
		chromedp.WaitVisible(chromedp.Search(`//li[@data-testid="packet"]//a[contains(., "Send email to ana@example.net")]`)),
		chromedp.KeyEvent("j"),
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-empty]`)),
	)

	// The owner's card turns into the result, without a reload.
	step(t, owner, "the conversation shows the result",
		chromedp.WaitVisible(chromedp.CSS(card+`[data-status=applied] [data-testid=result]`)),
	)
	if got := mustText(t, owner, card+" [data-testid=result]"); !strings.Contains(got, "outbox") {
		t.Fatalf("the result shows %q", got)
	}

	// A new packet arrives in the open queue live; r, a reason, Enter rejects it.
	second := send("bob@example.net", "Upsell", "email-bob-000000001")
	step(t, approver, "a live packet, rejected with the keyboard",
		chromedp.WaitVisible(chromedp.Search(`//li[@data-testid="packet"]//a[contains(., "bob@example.net")]`)),
		chromedp.KeyEvent("j"),
		chromedp.KeyEvent("r"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=reject-reason]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=reject-reason]`), "Not needed now.\r"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-empty]`)),
	)
	status, p := getJSON(t, s.URL+"/api/v1/proposals/"+second["proposal_id"].(string), agent)
	if status != 200 || p["status"] != "rejected" || p["rejection_reason"] != "Not needed now." {
		t.Fatalf("the agent reads %d %v", status, p)
	}
}
