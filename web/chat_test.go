package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/chat/chattest"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

func newChatEnv(t *testing.T, model *chattest.Model) *env {
	t.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return newEnvConfig(t, dbtest.MustPool(t), registry, web.Config{CookieSecure: true,
		Chat: chat.Config{BaseURL: model.URL, APIKey: "sk-web-test", Model: "fake-model", SweepEvery: 200 * time.Millisecond}})
}

// waitTurn polls the turn over the API until it is in one of the states.
func waitTurn(t *testing.T, e *env, token, turnURL string, states ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, turn := e.api(http.MethodGet, turnURL, token, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", turnURL, resp.StatusCode, turn)
		}
		for _, s := range states {
			if turn["state"] == s {
				return turn
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn = %v, want %v", turn, states)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestChatAPI_UserMessageStartsATurnThatResumesAfterApproval(t *testing.T) {
	model := chattest.New(t,
		chattest.Response{Text: []string{"I'll save it."}, Calls: []chattest.Call{{ID: "call_1", Name: "records_put",
			Arguments: `{"collection":"notes","key":"k","value":{"a":1},"rationale":"The user asked me to save this note."}`}}, PromptTokens: 40, CompletionTokens: 8},
		chattest.Response{Text: []string{"Done: saved."}, PromptTokens: 60, CompletionTokens: 4},
	)
	e := newChatEnv(t, model)
	e.user("owner@example.com", auth.RoleMember)
	userTok := e.token("owner@example.com", auth.TokenUser)
	agentTok := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api(http.MethodPost, "/api/v1/conversations", userTok, map[string]any{"title": "chat"})
	id := conv["id"].(string)

	// An agent's message starts nothing, as before.
	resp, body := e.api(http.MethodPost, "/api/v1/conversations/"+id+"/messages", agentTok, map[string]any{"role": "assistant", "content": "agent here"})
	if resp.StatusCode != http.StatusCreated || body["turn_id"] != nil {
		t.Fatalf("agent message: %d %v", resp.StatusCode, body)
	}
	resp, body = e.api(http.MethodPost, "/api/v1/conversations/"+id+"/messages", userTok, map[string]any{"role": "user", "content": "Save a note"})
	if resp.StatusCode != http.StatusCreated || body["turn_id"] == nil {
		t.Fatalf("user message: %d %v", resp.StatusCode, body)
	}
	turnURL := body["turn_url"].(string)
	turn := waitTurn(t, e, userTok, turnURL, "waiting")
	calls := turn["calls"].([]any)
	proposalID := calls[0].(map[string]any)["proposal_id"].(string)
	// A second message while the turn runs is refused.
	if resp, body := e.api(http.MethodPost, "/api/v1/conversations/"+id+"/messages", userTok, map[string]any{"role": "user", "content": "and another"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second message: %d %v", resp.StatusCode, body)
	}
	// An agent cannot stop it; the owner approves the card over REST, and
	// the server's own runner resumes the turn.
	if resp, _ := e.api(http.MethodPost, turnURL+"/stop", agentTok, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("agent stop: %d", resp.StatusCode)
	}
	if resp, body := e.api(http.MethodPost, "/api/v1/proposals/"+proposalID+"/apply", userTok, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %d %v", resp.StatusCode, body)
	}
	turn = waitTurn(t, e, userTok, turnURL, "done")
	if turn["prompt_tokens"].(float64) != 100 || turn["completion_tokens"].(float64) != 12 {
		t.Fatalf("tokens = %v + %v", turn["prompt_tokens"], turn["completion_tokens"])
	}
	_, list := e.api(http.MethodGet, "/api/v1/conversations/"+id+"/messages", userTok, nil)
	var lines []string
	for _, m := range list["messages"].([]any) {
		mm := m.(map[string]any)
		lines = append(lines, mm["role"].(string)+":"+mm["content"].(string))
	}
	want := "assistant:agent here|user:Save a note|assistant:I'll save it.|tool:records.put|assistant:Done: saved."
	if got := strings.Join(lines, "|"); got != want {
		t.Fatalf("transcript = %s\nwant %s", got, want)
	}
	// The page shows the token total and the chat panel.
	owner := e.client()
	owner.signIn("owner@example.com", password)
	_, page := owner.get("/conversations/" + id)
	for _, want := range []string{`data-testid="chat-tokens"`, "112 tokens", `data-testid="chat-panel"`, "model (fake-model) for owner@example.com"} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %q", want)
		}
	}
	if resp, _ := e.api(http.MethodPost, turnURL+"/stop", userTok, nil); resp.StatusCode != http.StatusConflict {
		t.Fatalf("stopping a finished turn: %d", resp.StatusCode)
	}
}

func TestChatPage_ComposerStartsATurnAndStopWorks(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	model := chattest.New(t, chattest.Response{Text: []string{"Thinking", " more"}, Hold: hold})
	e := newChatEnv(t, model)
	owner := e.user("owner@example.com", auth.RoleMember)
	resp, _ := owner.postForm("/conversations", url.Values{"title": {"page chat"}})
	loc := resp.Header.Get("Location")
	owner.get(loc)
	resp, body := owner.postForm(loc+"/messages", url.Values{"content": {"Hello model"}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("HX-Trigger") != "transcript-changed" {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	// The panel shows the text as it streams, and a stop button.
	var panel string
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(panel, "Thinking") {
		if time.Now().After(deadline) {
			t.Fatalf("panel = %s", panel)
		}
		time.Sleep(50 * time.Millisecond)
		_, panel = owner.get(loc + "/chat")
	}
	if !strings.Contains(panel, `data-testid="chat-stop"`) || !strings.Contains(panel, `id="chat-tokens"`) {
		t.Fatalf("panel = %s", panel)
	}
	turnID := regexpFind(t, panel, `name="turn_id" value="([^"]+)"`)
	// Another message while it answers: the reason next to the composer.
	resp, body = owner.postForm(loc+"/messages", url.Values{"content": {"again"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "still on the previous message") {
		t.Fatalf("second send: %d %s", resp.StatusCode, body)
	}
	resp, body = owner.postForm(loc+"/chat/stop", url.Values{"turn_id": {turnID}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "stopped") {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	// Settings: a bad budget is refused next to the field.
	resp, body = owner.postForm(loc+"/chat/settings", url.Values{"model": {"fake-model"}, "token_budget": {"lots"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "whole number") {
		t.Fatalf("bad budget: %d %s", resp.StatusCode, body)
	}
	resp, body = owner.postForm(loc+"/chat/settings", url.Values{"model": {"fake-model"}, "token_budget": {"5000"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `value="5000"`) {
		t.Fatalf("budget: %d %s", resp.StatusCode, body)
	}
}

func TestChatPage_WithoutAModelSaysSo(t *testing.T) {
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	resp, _ := owner.postForm("/conversations", url.Values{"title": {"no model"}})
	_, page := owner.get(resp.Header.Get("Location"))
	if !strings.Contains(page, `data-testid="chat-off"`) || !strings.Contains(page, "No model is set") {
		t.Fatal("the page does not say that no model is set")
	}
	// The composer still posts a message.
	loc := resp.Header.Get("Location")
	resp, body := owner.postForm(loc+"/messages", url.Values{"content": {"just a note"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	if _, page := owner.get(loc); !strings.Contains(page, "just a note") {
		t.Fatal("the message is not in the transcript")
	}
}

func regexpFind(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in %s", pattern, s)
	}
	return m[1]
}

// A card approved on another instance resumes the turn; one instance
// asks the model, once.
func TestChatAPI_ApprovalOnAnotherInstanceResumesTheTurnOnce(t *testing.T) {
	model := chattest.New(t,
		chattest.Response{Calls: []chattest.Call{{ID: "call_1", Name: "records_put",
			Arguments: `{"collection":"notes","key":"k","value":{"a":1},"rationale":"The user asked me to save this note."}`}}},
		chattest.Response{Text: []string{"Saved."}},
	)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.MustPool(t)
	cfg := web.Config{CookieSecure: true, Chat: chat.Config{BaseURL: model.URL, Model: "fake-model", SweepEvery: 200 * time.Millisecond}}
	a := newEnvConfig(t, pool, registry, cfg)
	b := newEnvConfig(t, pool, registry, cfg)
	a.user("owner@example.com", auth.RoleMember)
	tok := a.token("owner@example.com", auth.TokenUser)
	_, conv := a.api(http.MethodPost, "/api/v1/conversations", tok, map[string]any{"title": "chat"})
	_, started := a.api(http.MethodPost, "/api/v1/conversations/"+conv["id"].(string)+"/messages", tok, map[string]any{"role": "user", "content": "Save a note"})
	turnURL := started["turn_url"].(string)
	turn := waitTurn(t, a, tok, turnURL, "waiting")
	proposal := turn["calls"].([]any)[0].(map[string]any)["proposal_id"].(string)
	if resp, body := b.api(http.MethodPost, "/api/v1/proposals/"+proposal+"/apply", tok, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("apply on b: %d %v", resp.StatusCode, body)
	}
	waitTurn(t, b, tok, turnURL, "done")
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
}
