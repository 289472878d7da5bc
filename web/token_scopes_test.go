package web_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// scopedToken issues a token for the user with that email, as they would on
// /tokens.
func (e *env) scopedToken(email string, nt auth.NewToken) string {
	e.t.Helper()
	p, err := e.auth.Authenticate(context.Background(), email, password)
	if err != nil {
		e.t.Fatal(err)
	}
	secret, _, err := e.auth.IssueToken(context.Background(), p, nt)
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// tokenRefusal is the token layer's verdict in a refusal, "" when it allowed.
func tokenRefusal(body map[string]any) string {
	d, _ := body["decision"].(map[string]any)
	layers, _ := d["layers"].([]any)
	for _, l := range layers {
		l, _ := l.(map[string]any)
		if l["layer"] == "token" && l["state"] == "blocked" {
			return l["reason"].(string)
		}
	}
	return ""
}

func TestTokenScope_ReadOnlyTokenCannotMutateInAnAutoConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	user := e.token("owner@example.com", auth.TokenUser)
	reader := e.scopedToken("owner@example.com", auth.NewToken{Kind: auth.TokenAgent, Name: "reader", ReadOnly: true})
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "c"})
	id := conv["id"].(string)
	e.api("PATCH", "/api/v1/conversations/"+id, user, map[string]any{"permission_mode": "auto"})

	put := map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "store a note"}
	resp, body := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", reader, put)
	if resp.StatusCode != http.StatusForbidden || body["type"] != "urn:gatehouse:problem:forbidden" {
		t.Fatalf("read-only mutate: %d %v", resp.StatusCode, body)
	}
	if reason := tokenRefusal(body); !strings.Contains(reason, "token's scope is read-only") {
		t.Fatalf("the decision does not name the scope: %v", body)
	}
	if !strings.Contains(body["detail"].(string), "read-only") {
		t.Errorf("detail %q", body["detail"])
	}
	var n int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM records").Scan(&n); err != nil || n != 0 {
		t.Fatalf("records = %d, %v", n, err)
	}
	// Reads still run; the same call with an unscoped agent token applies.
	get := map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "read a note"}
	if resp, body := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", reader, get); resp.StatusCode != http.StatusOK {
		t.Fatalf("read-only read: %d %v", resp.StatusCode, body)
	}
	if resp, body := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", e.token("owner@example.com", auth.TokenAgent), put); resp.StatusCode != http.StatusOK {
		t.Fatalf("unscoped mutate in auto: %d %v", resp.StatusCode, body)
	}
}

func TestTokenScope_ToolsScopedTokenCannotCallAnotherTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	user := e.token("owner@example.com", auth.TokenUser)
	scoped := e.scopedToken("owner@example.com", auth.NewToken{Kind: auth.TokenAgent, Name: "getter", Tools: []string{"records.get"}})
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "c"})
	id := conv["id"].(string)
	e.api("PATCH", "/api/v1/conversations/"+id, user, map[string]any{"permission_mode": "auto"})
	// The token knows its scope.
	if _, me := e.api("GET", "/api/v1/me", scoped, nil); me["token"].(map[string]any)["scope"] == nil {
		t.Fatalf("me: %v", me)
	}
	if _, me := e.api("GET", "/api/v1/me", user, nil); me["token"].(map[string]any)["scope"] != nil {
		t.Fatalf("an unscoped token's me: %v", me)
	}

	list := map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "store a note"}
	resp, body := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", scoped, list)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(tokenRefusal(body), `allows only the tools records.get, so a call to "records.put"`) {
		t.Fatalf("out-of-scope tool: %d %v", resp.StatusCode, body)
	}
	// The dry run says so too.
	_, d := e.api("POST", "/api/v1/decisions", scoped, map[string]any{"conversation_id": id, "tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}})
	if d["state"] != "blocked" {
		t.Fatalf("dry run: %v", d)
	}
	get := map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "read a note"}
	if resp, body := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", scoped, get); resp.StatusCode != http.StatusOK {
		t.Fatalf("in-scope tool: %d %v", resp.StatusCode, body)
	}
}

func TestTokenScope_ExpiredTokenIs401(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	soon := time.Now().Add(time.Second)
	tok := e.scopedToken("owner@example.com", auth.NewToken{Kind: auth.TokenUser, Name: "short", ExpiresAt: &soon})
	if resp, body := e.api("GET", "/api/v1/me", tok, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("before expiry: %d %v", resp.StatusCode, body)
	}
	time.Sleep(time.Until(soon) + auth.TokenCacheTTL + 50*time.Millisecond)
	resp, body := e.api("GET", "/api/v1/me", tok, nil)
	if resp.StatusCode != http.StatusUnauthorized || body["type"] != "urn:gatehouse:problem:unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("after expiry: %d %v", resp.StatusCode, body)
	}
}

func TestTokenScope_ReadOnlyUserTokenCannotApplyAChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	user := e.token("owner@example.com", auth.TokenUser)
	agent := e.token("owner@example.com", auth.TokenAgent)
	reader := e.scopedToken("owner@example.com", auth.NewToken{Kind: auth.TokenUser, Name: "read-only script", ReadOnly: true})
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "c"})
	_, pending := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "store a note"})
	pid := pending["proposal_id"].(string)
	resp, body := e.api("POST", "/api/v1/proposals/"+pid+"/apply", reader, map[string]any{})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(tokenRefusal(body), "read-only") {
		t.Fatalf("read-only apply: %d %v", resp.StatusCode, body)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+pid, user, nil); p["status"] != "pending" {
		t.Fatalf("the proposal is %v", p["status"])
	}
	if resp, body := e.api("POST", "/api/v1/proposals/"+pid+"/apply", user, map[string]any{}); resp.StatusCode != http.StatusOK {
		t.Fatalf("unscoped apply: %d %v", resp.StatusCode, body)
	}
}

func TestTokenScope_MCPListsOnlyTheToolsTheTokenMayCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	reader := e.scopedToken("owner@example.com", auth.NewToken{Kind: auth.TokenAgent, Name: "reader", Tools: []string{"records.get", "records.put"}, ReadOnly: true})
	s := e.mustMCP(reader, "claude-code", nil)
	res, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	// check_proposal and submit_feedback are Gatehouse's own and change no
	// tool's effect: a scoped agent can still say where it got stuck.
	if strings.Join(names, " ") != "check_proposal records.get submit_feedback" {
		t.Fatalf("tools/list = %v", names)
	}
}
