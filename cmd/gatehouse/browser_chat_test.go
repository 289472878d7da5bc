//go:build e2e

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/chat/chattest"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// The owner types a message; the scripted model's answer streams into the
// page and its proposal appears as a card, with no reload; the owner
// approves it and sees the model's follow-up.
func TestBrowser_ChatStreamsProposesAndFollowsUpAfterApproval(t *testing.T) {
	hold := make(chan struct{})
	model := chattest.New(t,
		chattest.Response{Text: []string{"I will save ", "the note for Acme."}, Hold: hold,
			Calls: []chattest.Call{{ID: "call_put", Name: "records_put",
				Arguments: `{"collection":"clients","key":"acme","value":{"tier":"gold"},"rationale":"The user said Acme is now a gold client."}`}},
			PromptTokens: 120, CompletionTokens: 30},
		chattest.Response{Text: []string{"Done: Acme ", "is gold now."}, PromptTokens: 200, CompletionTokens: 9},
	)
	s := startServer(t, map[string]string{
		"DATABASE_URL":             dbtest.MustURL(t),
		"GATEHOUSE_ADMIN_EMAIL":    "root@example.com",
		"GATEHOUSE_ADMIN_PASSWORD": "the admin's password",
		"GATEHOUSE_LLM_BASE_URL":   model.URL,
		"GATEHOUSE_LLM_API_KEY":    "sk-browser-test",
		"GATEHOUSE_LLM_MODEL":      "fake-model",
	})
	if strings.Contains(s.stderr.String(), "sk-browser-test") {
		t.Fatal("the API key is in the log")
	}
	ctx := browser(t)
	signInBrowser(t, ctx, s.URL, "root@example.com", "the admin's password")
	step(t, ctx, "start a conversation",
		chromedp.Navigate(s.URL+"/conversations"),
		chromedp.SendKeys(chromedp.CSS(`input[name=title]`), "Clients"),
		chromedp.Click(chromedp.CSS(`form[action="/conversations"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=chat-panel]`)),
	)
	step(t, ctx, "type a message and see the answer stream in",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=composer]`), "Acme is a gold client now; save it."),
		chromedp.Click(chromedp.CSS(`[data-testid=send]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@data-testid="chat-streaming"][contains(., "I will save")]`)),
	)
	close(hold) // the rest of the answer, and its tool call
	step(t, ctx, "the proposal appears as a card without a reload",
		chromedp.WaitVisible(chromedp.Search(`//ol[@data-testid="transcript"]//li[contains(., "I will save the note for Acme.")]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=transcript] [data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@data-testid="chat-status"][contains(., "waits for your decision")]`)),
	)
	step(t, ctx, "approve it and see the model's follow-up",
		chromedp.Click(chromedp.CSS(`[data-testid=transcript] [data-testid=approve]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=transcript] [data-testid=result]`)),
		chromedp.WaitVisible(chromedp.Search(`//ol[@data-testid="transcript"]//li[contains(., "Done: Acme is gold now.")]`)),
		chromedp.WaitVisible(chromedp.Search(`//*[@data-testid="chat-tokens"][contains(., "359 tokens")]`)),
	)
	if got := mustText(t, ctx, `[data-testid=transcript] [data-testid=result]`); !strings.Contains(got, "gold") {
		t.Fatalf("the card's result shows %q", got)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	if res, ok := reqs[1].ToolResult("call_put"); !ok || res["status"] != "applied" {
		t.Fatalf("the model got %v", res)
	}
}
