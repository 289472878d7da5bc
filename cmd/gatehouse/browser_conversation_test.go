//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

func postJSON(t *testing.T, url, token string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d %v", url, resp.StatusCode, out)
	}
	return out
}

func TestBrowser_ToggleModeApproveAndRejectCards(t *testing.T) {
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
	})
	agent := strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "root@example.com", "--kind", "agent", "--name", "bot"))
	conv := postJSON(t, s.URL+"/api/v1/conversations", agent, map[string]any{"title": "Clients"})
	base := s.URL + "/api/v1/conversations/" + conv["id"].(string)
	put := postJSON(t, base+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold"}}, "rationale": "the user said Acme is gold"})
	// A note, not a delete: records.delete is high risk, so its call
	// waits for an approver, not on the owner's card.
	del := postJSON(t, base+"/tool-calls", agent, map[string]any{"tool": "notes.append",
		"arguments": map[string]any{"collection": "clients", "key": "old", "text": "an old client"}, "rationale": "clean up an old client",
		"idempotency_key": "note-old-client-0001"})

	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	page := s.URL + "/conversations/" + conv["id"].(string)

	// Toggle the header to auto; a reload shows what the row stores.
	err := chromedp.Do(ctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=mode-auto]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=mode-auto]`)),
		chromedp.WaitVisible(chromedp.Search(`//span[@data-testid="mode-current"][text()="auto"]`)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=mode-current]`)),
	)
	if err != nil {
		t.Fatalf("toggle: %v", err)
	}
	if got := mustText(t, ctx, `[data-testid=mode-current]`); got != "auto" {
		t.Fatalf("after reload the header shows %q, want auto", got)
	}

	// Approve the put: the card turns into its result in place.
	putCard := `#proposal-` + put["proposal_id"].(string)
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(putCard+` [data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(putCard+` [data-testid=result]`)),
	)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got := mustText(t, ctx, putCard+` [data-testid=result]`); !strings.Contains(got, "gold") {
		t.Fatalf("result shows %q", got)
	}

	// Reject the note with a reason.
	delCard := `#proposal-` + del["proposal_id"].(string)
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(delCard+` [data-testid=reject-reason]`), "keep it for the audit"),
		chromedp.Click(chromedp.CSS(delCard+` [data-testid=reject]`)),
		chromedp.WaitVisible(chromedp.CSS(delCard+` [data-testid=rejection]`)),
	)
	if err != nil {
		t.Fatalf("reject: %v", err)
	}
	if got := mustText(t, ctx, delCard+` [data-testid=rejection]`); got != "Rejected: keep it for the audit" {
		t.Fatalf("rejection shows %q", got)
	}
	status, p := getJSON(t, s.URL+"/api/v1/proposals/"+del["proposal_id"].(string), agent)
	if status != http.StatusOK || p["status"] != "rejected" || p["rejection_reason"] != "keep it for the audit" {
		t.Fatalf("agent reads %d %v", status, p)
	}
}
