package web_test

import (
	"context"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// wireRegistry is sendRegistry plus t.wire: a high-risk call whose packet
// waits for the finance-approver role and, by the tool's own rule, is
// escalated to approvers after 30 minutes.
func wireRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	base := sendRegistry(t)
	decls := []tools.Tool{{Name: "t.wire", Effect: policy.EffectMutate, Description: "Wire money.",
		Schema: json.RawMessage(`{"type":"object","required":["to"],"properties":{"to":{"type":"string","description":"who"}}}`),
		Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteNonIdempotent, Risk: policy.RiskHigh, ActionClass: "proposal.submit",
			Idempotency: tools.Idempotency{Required: true}, Summarize: func(a map[string]any) string { return "Wire to " + a["to"].(string) },
			Gating: tools.Gating{ApproverRole: "finance-approver", Escalation: tools.Escalation{After: 30 * time.Minute, To: "approver"}}},
		Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
			return map[string]any{"wired": true}, nil
		}}}
	for _, tool := range base.List() {
		decls = append(decls, *tool)
	}
	r, err := tools.NewRegistry(base.Classes(), decls...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// saveApprovalRules posts the settings form with the approval rules given
// (the other settings at their defaults).
func saveApprovalRules(admin *client, after, to, quorums string) (*http.Response, string) {
	return admin.postForm("/admin/settings", url.Values{"internal_domains": {""}, "webhook_allowlist": {""}, "rationale_min_length": {"10"},
		"rationale_mode": {"strict"}, "escalate_after_minutes": {after}, "escalate_to_role": {to}, "approval_quorums": {quorums}})
}

func TestApprovals_QuorumOfTwoHoldsUnderConcurrentVotes(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	admin := e.user("root@example.com", auth.RoleAdmin)
	e.user("owner@example.com", auth.RoleMember)
	approvers := []string{}
	for _, who := range []string{"a1@example.com", "a2@example.com", "a3@example.com"} {
		e.user(who, auth.RoleApprover)
		approvers = append(approvers, e.token(who, auth.TokenUser))
	}
	agent := e.token("owner@example.com", auth.TokenAgent)

	// Bad rules save nothing and say which field is wrong.
	for _, bad := range []struct{ after, to, quorums, field, says string }{
		{"0", "", "approver: 11", "approval_quorums", "the quorum of approver must be 2 to 10"},
		{"0", "", "approver two", "approval_quorums", "the quorum of approver must be 2 to 10"},
		{"0", "", "Finance Approver: 2", "approval_quorums", "is not \"role: number\""},
		{"30", "", "", "escalate_to_role", "is required to escalate"},
		{"-5", "admin", "", "escalate_after_minutes", "must be a whole number from 0 (never) to 10080"},
	} {
		resp, body := saveApprovalRules(admin, bad.after, bad.to, bad.quorums)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "Nothing was saved") || !strings.Contains(body, html.EscapeString(bad.says)) {
			t.Fatalf("%+v: %d\n%s", bad, resp.StatusCode, body)
		}
	}
	if n := e.count(`SELECT count(*) FROM workspaces WHERE approval_quorums <> '{}' OR escalate_after_minutes <> 0`); n != 0 {
		t.Fatalf("bad rules were saved: %d", n)
	}
	if resp, body := saveApprovalRules(admin, "0", "", "approver: 2"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save quorum: %d\n%s", resp.StatusCode, body)
	}
	if _, page := admin.get("/admin/settings"); !strings.Contains(page, "approver: 2</textarea>") {
		t.Fatalf("the settings page does not show the quorum:\n%s", page)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'workspace.setting_changed' AND data->>'setting' = 'approval_quorums'`); n != 1 {
		t.Fatalf("the change was audited %d times", n)
	}

	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "the client asked for it", "idempotency_key": "send-ana-quorum-0001"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["approvals_needed"] != float64(2) {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	packet := p["approval_id"].(string)

	// Three approvers at once: the first vote is recorded (202), the second
	// runs the call (200), the third finds it approved (409); the call ran
	// once, whatever the order.
	statuses := make([]int, len(approvers))
	var wg sync.WaitGroup
	for i, tok := range approvers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = adminJSON(t, e, "POST", "/admin/approvals/"+packet+"/approve", tok, map[string]any{})
		}()
	}
	wg.Wait()
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusOK, http.StatusAccepted, http.StatusConflict}) {
		t.Fatalf("concurrent votes answered %v", statuses)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+p["proposal_id"].(string), agent, nil); p["status"] != "applied" {
		t.Fatalf("the call: %v", p)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1 AND kind = 'execution'`, p["proposal_id"]); n != 1 {
		t.Fatalf("%d execution receipts", n)
	}
	if n := e.count(`SELECT count(*) FROM approval_votes WHERE approval_id = $1`, packet); n != 2 {
		t.Fatalf("%d votes recorded", n)
	}
	status, d := adminJSON(t, e, "GET", "/admin/approvals/"+packet, approvers[0], nil)
	if status != http.StatusOK || d["status"] != "approved" || d["approvals_needed"] != float64(2) {
		t.Fatalf("detail: %d %v", status, d)
	}

	// One vote on a new packet: the inbox shows the votes so far.
	_, p = e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "bob@example.com"}, "rationale": "the client asked for it", "idempotency_key": "send-bob-quorum-0001"})
	second := p["approval_id"].(string)
	if status, out := adminJSON(t, e, "POST", "/admin/approvals/"+second+"/approve", approvers[0], map[string]any{}); status != http.StatusAccepted ||
		out["approval"].(map[string]any)["status"] != "pending" {
		t.Fatalf("first vote: %d %v", status, out)
	}
	if _, page := admin.get("/admin/approvals?status=pending"); !strings.Contains(page, `data-testid="packet-votes">1 of 2 approvals`) {
		t.Fatalf("the inbox does not show the votes so far:\n%s", page)
	}
	// The owner (an approver of nothing here) and the same approver again
	// do not make a quorum.
	if status, _ := adminJSON(t, e, "POST", "/admin/approvals/"+second+"/approve", approvers[0], map[string]any{}); status != http.StatusAccepted {
		t.Fatalf("the same approver twice: %d", status)
	}
	if n := e.count(`SELECT count(*) FROM proposals WHERE id = $1 AND status = 'pending_approval'`, p["proposal_id"]); n != 1 {
		t.Fatal("one approver voting twice ran the call")
	}
}

func TestApprovals_EscalationOnATestClock(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	registry := wireRegistry(t)
	e := newEnvWith(t, pool, registry)
	admin := e.user("root@example.com", auth.RoleAdmin)
	e.user("owner@example.com", auth.RoleMember)
	e.user("fin@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	if err := e.auth.GrantApproverRole(t.Context(), auth.System(mustUUID(t, e.ws)), "fin@example.com", "finance-approver"); err != nil {
		t.Fatal(err)
	}
	agent := e.token("owner@example.com", auth.TokenAgent)
	boss := e.token("boss@example.com", auth.TokenUser)
	// The sweeper's clock is the test's: a second service on the same
	// database escalates what is due at the time it is given.
	sweeper := web.NewServices(pool, slog.New(slog.DiscardHandler), auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry).Proposals

	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	resp, p := e.api("POST", calls, agent, map[string]any{"tool": "t.wire", "arguments": map[string]any{"to": "acme"},
		"rationale": "the invoice is due today", "idempotency_key": "wire-acme-escalate-01"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["approver_role"] != "finance-approver" || p["escalated_to"] != nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	packet, proposal := p["approval_id"].(string), p["proposal_id"].(string)

	// Before: approvers do not hold finance-approver.
	if status, out := adminJSON(t, e, "POST", "/admin/approvals/"+packet+"/approve", boss, map[string]any{}); status != http.StatusForbidden {
		t.Fatalf("an approver before escalation: %d %v", status, out)
	}
	if ids, err := sweeper.EscalateApprovals(t.Context(), time.Now().Add(29*time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("escalated before it was due: %v %v", ids, err)
	}
	// 31 minutes on: escalated, once.
	ids, err := sweeper.EscalateApprovals(t.Context(), time.Now().Add(31*time.Minute))
	if err != nil || len(ids) != 1 || ids[0].String() != packet {
		t.Fatalf("escalate: %v %v", ids, err)
	}
	if ids, err := sweeper.EscalateApprovals(t.Context(), time.Now().Add(32*time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("escalated twice: %v %v", ids, err)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'approval.escalated' AND subject_id = $1
		AND data->>'to_role' = 'approver' AND data->>'from_role' = 'finance-approver' AND (data->>'after_minutes')::int = 30`, packet); n != 1 {
		t.Fatalf("%d escalation audit rows", n)
	}

	// The agent is told it still waits, escalated: not a failure.
	resp, p = e.api("GET", "/api/v1/proposals/"+proposal, agent, nil)
	if resp.StatusCode != http.StatusOK || p["status"] != "pending_approval" || p["escalated_to"] != "approver" ||
		!strings.Contains(p["note"].(string), "Still waiting") {
		t.Fatalf("the agent reads: %d %v", resp.StatusCode, p)
	}
	// Over MCP, check_proposal says the same.
	res, text := callTool(t, e.mustMCP(agent, "escalation-test", nil), "check_proposal", map[string]any{"proposal_id": proposal, "rationale": "is the escalated call decided?"})
	if res.IsError || !strings.Contains(text, "still waiting: escalated to the approver role") {
		t.Fatalf("check_proposal: %v %s", res.IsError, text)
	}
	// The approver is told (the notifications fold reads the escalation;
	// without SMTP the mail waits in the outbox), and the finance approver
	// is not told twice.
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := pool.QueryRow(t.Context(), `SELECT body FROM outbox WHERE recipient = 'boss@example.com'`).Scan(&body); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, "Escalated: an agent's call waited for the finance-approver role") {
		t.Fatalf("the approver's mail: %q", body)
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE proposal_id = $1 AND user_id = (SELECT id FROM users WHERE email = 'fin@example.com')`, proposal); n != 1 {
		t.Fatalf("the finance approver has %d notifications", n)
	}
	// The approver's queue shows it, escalated, and they may decide it.
	if _, page := admin.get("/admin/approvals/" + packet); !strings.Contains(page, `data-testid="escalation"`) || !strings.Contains(page, "escalated to the <strong>approver</strong> role") {
		t.Fatalf("the packet page does not say it was escalated:\n%s", page)
	}
	status, out := adminJSON(t, e, "GET", "/admin/approvals?status=pending", boss, nil)
	if list, _ := out["approvals"].([]any); status != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["escalated_at"] == nil {
		t.Fatalf("the approver's queue: %d %v", status, out)
	}
	if status, out := adminJSON(t, e, "POST", "/admin/approvals/"+packet+"/approve", boss, map[string]any{}); status != http.StatusOK ||
		out["proposal"].(map[string]any)["status"] != "applied" {
		t.Fatalf("the approver after escalation: %d %v", status, out)
	}

	// The workspace's rule, for a tool without its own: a t.send packet
	// escalates to admin after 10 minutes; one that reaches its expiry
	// unresolved still fails closed.
	if resp, body := saveApprovalRules(admin, "10", "admin", ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("save escalation: %d\n%s", resp.StatusCode, body)
	}
	_, p = e.api("POST", calls, agent, map[string]any{"tool": "t.send", "arguments": map[string]any{"to": "ana@example.com"},
		"rationale": "the client asked for it", "idempotency_key": "send-ana-escalate-01"})
	status, d := adminJSON(t, e, "GET", "/admin/approvals/"+p["approval_id"].(string), boss, nil)
	at, _ := time.Parse(time.RFC3339, d["escalate_at"].(string))
	if status != http.StatusOK || d["escalate_to"] != "admin" || at.Sub(time.Now()) < 9*time.Minute || at.Sub(time.Now()) > 11*time.Minute {
		t.Fatalf("the workspace's rule: %d %v", status, d)
	}
	e.pool.Exec(t.Context(), "UPDATE approvals SET expires_at = now() - interval '1 second' WHERE id = $1", p["approval_id"])
	if ids, err := sweeper.EscalateApprovals(t.Context(), time.Now().Add(11*time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("an expired packet was escalated: %v %v", ids, err)
	}
	if status, _ := adminJSON(t, e, "POST", "/admin/approvals/"+p["approval_id"].(string)+"/approve", boss, map[string]any{}); status != http.StatusGone {
		t.Fatalf("an expired packet: %d", status)
	}
}
