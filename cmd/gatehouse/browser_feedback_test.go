//go:build e2e

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// An agent reports where it got stuck; an admin triages the item on the
// feedback page, changing its status in place (htmx), and the change is
// what the JSON then says. With a newer report, a page of one item leads
// to the older one.
func TestBrowser_AdminTriagesAFeedbackItem(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	user := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "user", "--name", "script"))
	item := postJSON(t, s.URL+"/api/v1/feedback", agent, map[string]any{"attempted_action": "send the renewal reminder",
		"expected_outcome": "the email sent", "actual_outcome": "it waits for an approver", "tool_called": "email.send",
		"severity": "high", "rationale": "the client is waiting for the reminder"})
	if item["status"] != "new" {
		t.Fatalf("submit: %v", item)
	}
	row := "#feedback-" + item["id"].(string)

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	step(t, ctx, "open the feedback page",
		chromedp.Navigate(s.URL+"/admin/feedback"),
		chromedp.WaitVisible(chromedp.CSS(row+" [data-testid=feedback-status]")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=weekly-chart]`)),
	)
	if got := mustText(t, ctx, row+" [data-testid=feedback-status]"); got != "new" {
		t.Fatalf("status shows %q", got)
	}
	step(t, ctx, "move it to triaged with a note",
		chromedp.SendKeys(chromedp.CSS(row+" [data-testid=feedback-note-input]"), "Seen; the approver was away."),
		chromedp.Click(chromedp.CSS(row+" [data-testid=feedback-move]")),
		chromedp.WaitVisible(chromedp.CSS(row+" [data-testid=feedback-note]")),
	)
	if got := mustText(t, ctx, row+" [data-testid=feedback-status]"); got != "triaged" {
		t.Fatalf("after the move the status shows %q", got)
	}
	status, list := getJSON(t, s.URL+"/admin/feedback", user)
	items, _ := list["items"].([]any)
	if status != 200 || len(items) != 1 || items[0].(map[string]any)["status"] != "triaged" || items[0].(map[string]any)["admin_note"] != "Seen; the approver was away." {
		t.Fatalf("the JSON says %d %v", status, list)
	}

	newer := postJSON(t, s.URL+"/api/v1/feedback", agent, map[string]any{"attempted_action": "read the calendar",
		"expected_outcome": "today's meetings", "actual_outcome": "an empty list", "tool_called": "calendar.list",
		"severity": "low", "rationale": "the user asked what is on today"})
	step(t, ctx, "page through one item at a time",
		chromedp.Navigate(s.URL+"/admin/feedback?limit=1"),
		chromedp.WaitVisible(chromedp.CSS("#feedback-"+newer["id"].(string))),
		chromedp.Click(chromedp.CSS(`[data-testid=page-next]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=page-first]`)),
	)
	status, list = getJSON(t, s.URL+"/admin/feedback?limit=1", user)
	if next, _ := list["next_cursor"].(string); status != 200 || next == "" {
		t.Fatalf("a page of one of two: %d %v", status, list)
	}
}
