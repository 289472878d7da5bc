package web_test

import (
	"net/http"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestAPI_ConversationToolCallLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)

	resp, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Renewals"})
	if resp.StatusCode != http.StatusCreated || conv["permission_mode"] != "approve" {
		t.Fatalf("create: %d %v", resp.StatusCode, conv)
	}
	base := "/api/v1/conversations/" + conv["id"].(string)

	// A read runs at once.
	resp, read := e.api("POST", base+"/tool-calls", agent, map[string]any{
		"tool": "records.search", "arguments": map[string]any{"query": "x"}, "rationale": "look before writing anything"})
	if resp.StatusCode != http.StatusOK || read["status"] != "applied" || read["disposition"] != "auto-run" {
		t.Fatalf("read: %d %v", resp.StatusCode, read)
	}
	// A change waits for the owner in approve mode.
	resp, put := e.api("POST", base+"/tool-calls", agent, map[string]any{
		"tool": "records.put", "arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold"}},
		"rationale": "the user said Acme is now gold"})
	if resp.StatusCode != http.StatusAccepted || put["status"] != "pending" || put["disposition"] != "propose" || put["confirm_url"] == nil {
		t.Fatalf("put: %d %v", resp.StatusCode, put)
	}
	pid := put["proposal_id"].(string)

	// The agent cannot approve it, nor raise its own trust.
	if resp, p := e.api("POST", "/api/v1/proposals/"+pid+"/apply", agent, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("agent apply: %d %v", resp.StatusCode, p)
	}
	if resp, p := e.api("PATCH", base, agent, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("agent PATCH: %d %v", resp.StatusCode, p)
	}
	// The owner approves it once; a second approve is a conflict.
	resp, applied := e.api("POST", "/api/v1/proposals/"+pid+"/apply", user, nil)
	if resp.StatusCode != http.StatusOK || applied["status"] != "applied" || applied["apply_path"] != "human" {
		t.Fatalf("owner apply: %d %v", resp.StatusCode, applied)
	}
	if resp, p := e.api("POST", "/api/v1/proposals/"+pid+"/apply", user, nil); resp.StatusCode != http.StatusConflict || p["code"] != "conflict" {
		t.Fatalf("second apply: %d %v", resp.StatusCode, p)
	}
	// In auto mode the same kind of call applies at once; a delete still
	// asks: being high risk (ADR-036), an approver.
	if resp, p := e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK || p["permission_mode"] != "auto" {
		t.Fatalf("owner PATCH: %d %v", resp.StatusCode, p)
	}
	resp, auto := e.api("POST", base+"/tool-calls", agent, map[string]any{
		"tool": "notes.append", "arguments": map[string]any{"collection": "clients", "key": "acme", "text": "called"}, "rationale": "log the call we just had",
		"idempotency_key": "note-acme-called-0001"})
	if resp.StatusCode != http.StatusOK || auto["disposition"] != "auto-apply" || auto["status"] != "applied" {
		t.Fatalf("auto: %d %v", resp.StatusCode, auto)
	}
	resp, del := e.api("POST", base+"/tool-calls", agent, map[string]any{
		"tool": "records.delete", "arguments": map[string]any{"collection": "clients", "key": "acme"}, "rationale": "the client asked to be forgotten",
		"idempotency_key": "delete-acme-0000001"})
	if resp.StatusCode != http.StatusAccepted || del["disposition"] != "propose" || del["status"] != "pending_approval" || del["requires_human_approval"] != true {
		t.Fatalf("delete in auto: %d %v", resp.StatusCode, del)
	}
	// The owner cannot resolve the packet; an approver rejects it with a
	// reason the agent reads back.
	if resp, p := e.api("POST", "/api/v1/proposals/"+del["proposal_id"].(string)+"/reject", user, map[string]any{"reason": "not yet"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("the owner's reject of a packet: %d %v", resp.StatusCode, p)
	}
	e.user("boss@example.com", auth.RoleApprover)
	if status, p := adminJSON(t, e, "POST", "/admin/approvals/"+del["approval_id"].(string)+"/reject", e.token("boss@example.com", auth.TokenUser), map[string]any{"reason": "not yet"}); status != http.StatusOK {
		t.Fatalf("reject: %d %v", status, p)
	}
	if resp, p := e.api("GET", "/api/v1/proposals/"+del["proposal_id"].(string), agent, nil); resp.StatusCode != http.StatusOK || p["status"] != "rejected" || p["rejection_reason"] != "not yet" {
		t.Fatalf("agent reads: %d %v", resp.StatusCode, p)
	}
	// The transcript lists the tool calls in order.
	resp, msgs := e.api("GET", base+"/messages", agent, nil)
	if list, _ := msgs["messages"].([]any); resp.StatusCode != http.StatusOK || len(list) != 4 {
		t.Fatalf("messages: %d %v", resp.StatusCode, msgs)
	}
}

func TestAPI_ToolCallBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	other := e.token("other@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)

	cases := []struct {
		name   string
		token  string
		path   string
		body   any
		status int
		field  string
	}{
		{"missing rationale", agent, base + "/tool-calls", map[string]any{"tool": "records.get", "arguments": map[string]any{}}, 422, "rationale"},
		{"short rationale", agent, base + "/tool-calls", map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "x"}, 422, "rationale"},
		{"schema", agent, base + "/tool-calls", map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c"}, "rationale": "a good enough reason"}, 422, "arguments.key"},
		{"unknown tool", agent, base + "/tool-calls", map[string]any{"tool": "rm.rf", "arguments": map[string]any{}, "rationale": "a good enough reason"}, 404, "tool"},
		{"malformed JSON", agent, base + "/tool-calls", `{"tool":`, 400, ""},
		{"another user's conversation", other, base + "/tool-calls", map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "a good enough reason"}, 404, ""},
		{"unknown conversation", agent, "/api/v1/conversations/not-a-uuid/tool-calls", map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "a good enough reason"}, 404, ""},
		{"bad mode", e.token("owner@example.com", auth.TokenUser), base, map[string]any{"permission_mode": "yolo"}, 422, "permission_mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := "POST"
			if c.path == base {
				method = "PATCH"
			}
			resp, p := e.api(method, c.path, c.token, c.body)
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %v, want %d problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), p, c.status)
			}
			if c.field != "" {
				errs, _ := p["errors"].([]any)
				found := false
				for _, fe := range errs {
					if fe.(map[string]any)["field"] == c.field {
						found = true
					}
				}
				if !found {
					t.Fatalf("errors %v do not name %s", p["errors"], c.field)
				}
			}
		})
	}
	var n int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals").Scan(&n)
	if n != 0 {
		t.Fatalf("bad input left %d proposals", n)
	}
}
