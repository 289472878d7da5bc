//go:build e2e

package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

var linkPath = regexp.MustCompile(`/l/[A-Za-z0-9_-]+`)

// An approver gets a packet's notification (held in the outbox: no mail
// server here), opens its one-time link on a phone-sized screen (360 px:
// no sideways scroll, axe clean), sees exactly what would run, confirms
// the irreversible call and approves it, once: the link then says it was
// used.
func TestBrowser_ANotificationsLinkApprovesOnceFromAPhone(t *testing.T) {
	dsn := dbtest.MustURL(t)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dsn,
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	s.cli(t, "the member's password\n", "user", "create", "--email", "ana@example.com", "--role", "member")
	s.cli(t, "the approver's password\n", "user", "create", "--email", "boss@example.com", "--role", "approver")
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "agent", "--name", "bot"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Cleanup"})["id"].(string)
	keys := make([]any, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("old-%d", i)
	}
	call := postJSON(t, s.URL+"/api/v1/conversations/"+conv+"/tool-calls", agent, map[string]any{"tool": "records.bulk_delete",
		"arguments": map[string]any{"collection": "crm", "keys": keys}, "rationale": "remove the stale records the owner listed",
		"idempotency_key": "browser-notify-000001"})
	approval, _ := call["approval_id"].(string)
	if approval == "" {
		t.Fatalf("no packet: %v", call)
	}

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for body == "" && time.Now().Before(deadline) {
		conn.QueryRow(context.Background(), `SELECT body FROM outbox WHERE recipient = 'boss@example.com' ORDER BY id DESC LIMIT 1`).Scan(&body)
		time.Sleep(200 * time.Millisecond)
	}
	link := linkPath.FindString(body)
	if link == "" {
		t.Fatalf("no link in the approver's mail: %q", body)
	}

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "boss@example.com", "the approver's password")
	step(t, ctx, "open the link at phone width",
		chromedp.EmulateViewport(360, 800),
		chromedp.Navigate(s.URL+link),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=link-page]`)),
	)
	if tool := mustText(t, ctx, `[data-testid=link-tool]`); tool != "records.bulk_delete" {
		t.Errorf("tool %q", tool)
	}
	if args := mustText(t, ctx, `[data-testid=link-arguments]`); !strings.Contains(args, "old-11") {
		t.Errorf("the arguments shown: %q", args)
	}
	wide, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > innerWidth`))
	if err != nil || wide {
		culprits, _ := chromedp.Run(ctx, chromedp.Evaluate[string](overflowCulprits))
		t.Errorf("the link's page scrolls sideways at 360 px: %v %s", err, culprits)
	}
	for _, v := range axeCheck(t, ctx, "the link's page") {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("axe: %s (%s): %s", v.ID, v.Impact, v.Help)
		}
	}
	var status string
	conn.QueryRow(context.Background(), `SELECT status FROM approvals WHERE id = $1`, approval).Scan(&status)
	if status != "pending" {
		t.Fatalf("opening the link changed the packet: %s", status)
	}

	step(t, ctx, "confirm and approve",
		chromedp.Click(chromedp.CSS(`[data-testid=link-ack]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=link-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=link-done]`)),
	)
	conn.QueryRow(context.Background(), `SELECT status FROM approvals WHERE id = $1`, approval).Scan(&status)
	if status != "approved" {
		t.Fatalf("the packet after the link's approval: %s", status)
	}
	step(t, ctx, "open the link again",
		chromedp.Navigate(s.URL+link),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=link-problem]`)),
	)
	if msg := mustText(t, ctx, `[data-testid=link-problem]`); !strings.Contains(msg, "used already") {
		t.Errorf("the used link says %q", msg)
	}
}
