package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// sendRegistry is the built-in tools plus a high-risk send, deferred to an
// approver unless the workspace opts in.
func sendRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	builtin, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	decls := []tools.Tool{{Name: "t.send", Effect: policy.EffectMutate, Description: "Send a message.",
		Schema: json.RawMessage(`{"type":"object","required":["to"],"properties":{"to":{"type":"string","description":"who"}}}`),
		Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskHigh, ActionClass: "proposal.submit",
			Idempotency: tools.Idempotency{Required: true}, Summarize: func(a map[string]any) string { return "Send to " + a["to"].(string) }},
		Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
			return map[string]any{"sent": true}, nil
		}}}
	for _, tool := range builtin.List() {
		decls = append(decls, *tool)
	}
	r, err := tools.NewRegistry(builtin.Classes(), decls...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestApprovalsAPI_QueueApproveRejectAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	approver := e.token("boss@example.com", auth.TokenUser)
	approverAgent := e.token("boss@example.com", auth.TokenAgent)
	member := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	propose := func(to, key string) map[string]any {
		resp, p := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "t.send", "arguments": map[string]any{"to": to},
			"rationale": "the client asked for it", "idempotency_key": key})
		if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["requires_human_approval"] != true ||
			p["summary"] != "Send to "+to || !strings.HasPrefix(p["approval_url"].(string), "/admin/approvals/") || p["ttl_seconds"].(float64) < 86000 {
			t.Fatalf("propose: %d %v", resp.StatusCode, p)
		}
		return p
	}
	first, second, third := propose("ana@example.com", "send-ana-00000000001"), propose("bob@example.com", "send-bob-00000000001"), propose("cy@example.com", "send-cy-000000000001")

	// The queue, as JSON for an approver's token.
	status, queue := adminJSON(t, e, "GET", "/admin/approvals?status=pending", approver, nil)
	list, _ := queue["approvals"].([]any)
	if status != http.StatusOK || len(list) != 3 {
		t.Fatalf("queue: %d %v", status, queue)
	}
	for _, who := range []string{approverAgent, member} {
		if status, p := adminJSON(t, e, "GET", "/admin/approvals?status=pending", who, nil); status != http.StatusForbidden {
			t.Fatalf("queue for a non-approver: %d %v", status, p)
		}
	}
	// Approve the first: the call runs and the agent reads the result.
	status, out := adminJSON(t, e, "POST", "/admin/approvals/"+first["approval_id"].(string)+"/approve", approver, map[string]any{})
	if status != http.StatusOK || out["proposal"].(map[string]any)["status"] != "applied" {
		t.Fatalf("approve: %d %v", status, out)
	}
	if status, p := adminJSON(t, e, "POST", "/admin/approvals/"+first["approval_id"].(string)+"/approve", approver, map[string]any{}); status != http.StatusConflict {
		t.Fatalf("approve twice: %d %v", status, p)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+first["proposal_id"].(string), agent, nil); p["status"] != "applied" || p["apply_path"] != "approval" {
		t.Fatalf("the agent reads %v", p)
	}
	// Reject the second with a reason the agent reads.
	if status, p := adminJSON(t, e, "POST", "/admin/approvals/"+second["approval_id"].(string)+"/reject", approver, map[string]any{"reason": "Wrong recipient."}); status != http.StatusOK {
		t.Fatalf("reject: %d %v", status, p)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+second["proposal_id"].(string), agent, nil); p["status"] != "rejected" || p["rejection_reason"] != "Wrong recipient." {
		t.Fatalf("the agent reads %v", p)
	}
	// The third expires: 410, and nothing runs.
	e.pool.Exec(t.Context(), "UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1", third["approval_id"])
	if status, p := adminJSON(t, e, "POST", "/admin/approvals/"+third["approval_id"].(string)+"/approve", approver, map[string]any{}); status != http.StatusGone || p["code"] != "gone" {
		t.Fatalf("expired: %d %v", status, p)
	}
	// The detail, with every layer's reason.
	status, d := adminJSON(t, e, "GET", "/admin/approvals/"+first["approval_id"].(string), approver, nil)
	layers, _ := d["decision"].(map[string]any)["layers"].([]any)
	if status != http.StatusOK || d["status"] != "approved" || len(layers) != 6 {
		t.Fatalf("detail: %d %v", status, d)
	}
	if status, _ := adminJSON(t, e, "GET", "/admin/approvals/"+uuid.NewString(), approver, nil); status != http.StatusNotFound {
		t.Fatalf("unknown packet: %d", status)
	}
}

// adminJSON calls an admin JSON endpoint with a bearer token.
func adminJSON(t *testing.T, e *env, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(string(raw)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	respBody := []byte(readBody(t, resp))
	checkAgainstSpec(t, req, raw, resp, respBody)
	var out map[string]any
	json.Unmarshal(respBody, &out)
	return resp.StatusCode, out
}

func TestApprovalsPage_QueueDetailAndBulk(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	boss := e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	var ids []string
	for _, to := range []string{"ana@example.com", "bob@example.com"} {
		_, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
			"arguments": map[string]any{"to": to}, "rationale": "the client asked for it", "idempotency_key": "send-" + strings.Split(to, "@")[0] + "-000000000001"})
		ids = append(ids, p["approval_id"].(string))
	}
	// A claim that never finished shows for review; only admins settle it.
	e.pool.Exec(t.Context(), `UPDATE proposals SET status = 'applying', claimed_at = now() - interval '1 hour'
		WHERE id = (SELECT proposal_id FROM approvals WHERE id = $1)`, ids[1])
	resp, body := boss.get("/admin/approvals")
	if !strings.Contains(body, `data-testid="stuck"`) || strings.Contains(body, "It did not run</button>") {
		t.Fatalf("stuck section for an approver:\n%s", body)
	}
	e.pool.Exec(t.Context(), `UPDATE proposals SET status = 'pending_approval', claimed_at = NULL
		WHERE id = (SELECT proposal_id FROM approvals WHERE id = $1)`, ids[1])
	resp, body = boss.get("/admin/approvals")
	if resp.StatusCode != http.StatusOK || strings.Count(body, `data-testid="packet"`) != 2 || !strings.Contains(body, "Send to ana@example.com") ||
		!strings.Contains(body, `sse-connect="/admin/approvals/events"`) {
		t.Fatalf("queue page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = boss.get("/admin/approvals/" + ids[0])
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "the client asked for it") || !strings.Contains(body, "Approve and run") {
		t.Fatalf("detail page: %d", resp.StatusCode)
	}
	// A bad constraint re-renders the page with the message.
	resp, body = boss.postForm("/admin/approvals/"+ids[0]+"/approve", url.Values{"max_amount": {"lots"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "max amount must be a positive number") {
		t.Fatalf("bad constraint: %d", resp.StatusCode)
	}
	// Approve from the page with a dry-run constraint: it runs as a dry run.
	resp, _ = boss.postForm("/admin/approvals/"+ids[0]+"/approve", url.Values{"dry_run_only": {"on"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve from the page: %d", resp.StatusCode)
	}
	var dry bool
	e.pool.QueryRow(t.Context(), "SELECT p.dry_run FROM proposals p JOIN approvals a ON a.proposal_id = p.id WHERE a.id = $1", ids[0]).Scan(&dry)
	if !dry {
		t.Fatal("the approver's dry_run_only constraint did not hold")
	}
	// Bulk reject the rest.
	boss.get("/admin/approvals")
	resp, body = boss.postForm("/admin/approvals/bulk", url.Values{"action": {"reject"}, "reason": {"Not needed now."}, "ids": {ids[1]}, "query": {"status=pending"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/approvals?status=pending" {
		t.Fatalf("bulk reject: %d\n%s", resp.StatusCode, body)
	}
	if _, body = boss.get("/admin/approvals"); !strings.Contains(body, `data-testid="queue-empty"`) {
		t.Fatalf("after bulk reject:\n%s", body)
	}
	var status string
	e.pool.QueryRow(t.Context(), "SELECT status FROM approvals WHERE id = $1", ids[1]).Scan(&status)
	if status != "rejected" {
		t.Fatalf("after bulk reject: %s", status)
	}
}
