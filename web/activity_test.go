package web_test

import (
	"net/http"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// A call in a conversation makes it the most recently active without
// writing the conversation's row (which every call would queue on).
func TestConversations_ListedByLastActivityWithoutTouchingTheirRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, older := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "older"})
	_, newer := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "newer"})
	var before string
	e.pool.QueryRow(t.Context(), "SELECT updated_at::text FROM conversations WHERE id = $1", older["id"]).Scan(&before)
	e.api("POST", "/api/v1/conversations/"+older["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.search",
		"arguments": map[string]any{"query": "x"}, "rationale": "look something up"})
	resp, list := e.api("GET", "/api/v1/conversations", agent, nil)
	items, _ := list["conversations"].([]any)
	if resp.StatusCode != http.StatusOK || len(items) != 2 || items[0].(map[string]any)["id"] != older["id"] {
		t.Fatalf("list after a call in the older conversation: %v (newer is %v)", list, newer["id"])
	}
	var after string
	e.pool.QueryRow(t.Context(), "SELECT updated_at::text FROM conversations WHERE id = $1", older["id"]).Scan(&after)
	if after != before {
		t.Fatal("a call wrote the conversation's row")
	}
}
