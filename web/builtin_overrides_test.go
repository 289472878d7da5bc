package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The policy file's overrides of built-in tools reach the decision: a
// looser rate limit than the irreversible class's default, and a class
// change with its reason, shown to callers.
func TestBuiltinOverrides_ThePolicyFileDecidesBuiltinTools(t *testing.T) {
	t.Parallel()
	e, _ := newEnvPolicy(t, `
tools:
  records.delete:
    rate_limits: {per_agent_per_minute: 3}
  notes.append:
    risk: high
    class_rationale: Notes here reach customers, so an approver looks first.
`)
	e.user("owner@example.com", auth.RoleMember)
	agent, user := e.token("owner@example.com", auth.TokenAgent), e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	e.api("PATCH", "/api/v1/conversations/"+conv["id"].(string), user, map[string]any{"permission_mode": "auto"})
	// The four deletes are counted in one fixed minute: not started in a
	// minute's last seconds, where a loaded machine would spread them over
	// two.
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 15*time.Second {
		time.Sleep(left)
	}
	for i, key := range []string{"delete-override-0001", "delete-override-0002", "delete-override-0003", "delete-override-0004"} {
		resp, p := e.api("POST", calls, agent, map[string]any{"tool": "records.delete", "arguments": map[string]any{"collection": "c", "key": "k"},
			"rationale": "clean up the test records", "idempotency_key": key})
		if want := http.StatusAccepted; i == 3 {
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(p["detail"].(string), "allows 3 calls per minute") {
				t.Fatalf("the fourth delete: %d %v", resp.StatusCode, p)
			}
		} else if resp.StatusCode != want {
			t.Fatalf("delete %d: %d %v", i+1, resp.StatusCode, p)
		}
	}
	resp, p := e.api("POST", calls, agent, map[string]any{"tool": "notes.append", "arguments": map[string]any{"collection": "c", "key": "k", "text": "hi"},
		"rationale": "tell the customer we are on it", "idempotency_key": "notes-override-0001"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["risk"] != "high" {
		t.Fatalf("notes.append, high risk by the file: %d %v", resp.StatusCode, p)
	}
	_, list := e.api("GET", "/api/v1/tools", agent, nil)
	for _, x := range list["tools"].([]any) {
		if tool := x.(map[string]any); tool["name"] == "notes.append" {
			if c := tool["contract"].(map[string]any); c["risk"] != "high" || !strings.HasPrefix(c["class_rationale"].(string), "Notes here reach customers") {
				t.Fatalf("notes.append's contract: %v", c)
			}
		}
	}
}
