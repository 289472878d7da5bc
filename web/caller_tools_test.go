package web_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// callerPolicy declares one tool the agent runs itself.
const callerPolicy = `
caller_tools:
  - name: app.send_invoice
    description: Send an invoice from the agent's own billing system.
    effect: mutate
    authority: write-idempotent
    action_class: tool.call.local
    risk: medium
    class_rationale: Sending the same invoice again overwrites the draft; the billing system keys it by number.
    schema:
      type: object
      required: [invoice]
      additionalProperties: false
      properties:
        invoice: {type: string}
        amount: {type: number}
`

// callerEnv is a server with callerPolicy, an owner with an agent token,
// and a second service on the same database whose clock is the test's
// (the sweeper).
type callerEnv struct {
	*env
	agent, other, user string
	owner              *client
	sweeper            *proposals.Service
}

func newCallerEnv(t *testing.T) *callerEnv {
	t.Helper()
	return newCallerEnvPolicy(t, callerPolicy)
}

// newCallerEnvPolicy is newCallerEnv with another policy file.
func newCallerEnvPolicy(t *testing.T, policy string) *callerEnv {
	t.Helper()
	e, _ := newEnvPolicy(t, policy)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	file, err := tools.ParsePolicyFile([]byte(policy), registry.Classes(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.DeclareCallerTools(registry, file); err != nil {
		t.Fatal(err)
	}
	owner := e.user("owner@example.com", auth.RoleMember)
	ce := &callerEnv{env: e, owner: owner, agent: e.token("owner@example.com", auth.TokenAgent), other: e.token("owner@example.com", auth.TokenAgent),
		user:    e.token("owner@example.com", auth.TokenUser),
		sweeper: web.NewServices(e.pool, slog.New(slog.DiscardHandler), auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry).Proposals}
	return ce
}

// conversation is a new conversation of the agent's in mode.
func (e *callerEnv) conversation(mode string) string {
	e.t.Helper()
	_, conv := e.api("POST", "/api/v1/conversations", e.agent, map[string]any{"title": "Invoices"})
	base := "/api/v1/conversations/" + conv["id"].(string)
	if mode != "approve" {
		if resp, c := e.api("PATCH", base, e.user, map[string]any{"permission_mode": mode}); resp.StatusCode != http.StatusOK {
			e.t.Fatalf("mode: %d %v", resp.StatusCode, c)
		}
	}
	return base + "/tool-calls"
}

// invoice proposes app.send_invoice.
func (e *callerEnv) invoice(calls, number string) (*http.Response, map[string]any) {
	e.t.Helper()
	return e.api("POST", calls, e.agent, map[string]any{"tool": "app.send_invoice", "arguments": map[string]any{"invoice": number, "amount": 120},
		"rationale": "the customer asked for the March invoice"})
}

func (e *callerEnv) report(token, id string, body map[string]any) (*http.Response, map[string]any) {
	e.t.Helper()
	return e.api("POST", "/api/v1/proposals/"+id+"/outcome", token, body)
}

// problemFields names the fields of a problem.
func problemFields(p map[string]any) string {
	var names []string
	errs, _ := p["errors"].([]any)
	for _, f := range errs {
		if m, ok := f.(map[string]any); ok {
			names = append(names, m["field"].(string))
		}
	}
	return strings.Join(names, ",")
}

func TestCallerTools_AnAutomaticCallGetsATicketRunsNothingAndOneReportClosesIt(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("auto")

	resp, p := e.invoice(calls, "INV-1")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "applying" || p["apply_path"] != "auto" || p["result"] != nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	id, ticket := p["proposal_id"].(string), p["execution_ticket"].(string)
	expires, err := time.Parse(time.RFC3339, p["ticket_expires_at"].(string))
	if err != nil || time.Until(expires) < 4*time.Minute || time.Until(expires) > 5*time.Minute+time.Second {
		t.Fatalf("ticket_expires_at: %v %v", p["ticket_expires_at"], err)
	}
	// Nothing ran or was recorded as run: no execution receipt yet.
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1`, id); n != 0 {
		t.Fatalf("receipts before the report: %d", n)
	}
	// The proposer reads the same ticket; another token of the same user
	// reads the call without one.
	if _, g := e.api("GET", "/api/v1/proposals/"+id, e.agent, nil); g["execution_ticket"] != ticket {
		t.Fatalf("the proposer's GET: %v", g)
	}
	if _, g := e.api("GET", "/api/v1/proposals/"+id, e.other, nil); g["status"] != "applying" || g["execution_ticket"] != nil {
		t.Fatalf("another token's GET: %v", g)
	}

	// A second call: its ticket is not the first's.
	_, p2 := e.invoice(calls, "INV-2")
	id2, ticket2 := p2["proposal_id"].(string), p2["execution_ticket"].(string)
	if ticket2 == ticket {
		t.Fatal("two calls have one ticket")
	}
	// One character of the MAC changed to another base64url character (a
	// flipped bit could leave the alphabet, which is another error).
	altered := []byte(ticket)
	if altered[3] == 'A' {
		altered[3] = 'B'
	} else {
		altered[3] = 'A'
	}
	for _, c := range []struct {
		name, token, id string
		body            map[string]any
		status          int
		field           string
	}{
		{"another token", e.other, id, map[string]any{"ticket": ticket, "status": "succeeded"}, 403, "ticket"},
		{"altered", e.agent, id, map[string]any{"ticket": string(altered), "status": "succeeded"}, 403, "ticket"},
		{"another call's ticket", e.agent, id, map[string]any{"ticket": ticket2, "status": "succeeded"}, 403, "ticket"},
		{"other arguments", e.agent, id, map[string]any{"ticket": ticket, "status": "succeeded", "arguments": map[string]any{"invoice": "INV-9", "amount": 120}}, 403, "arguments"},
		{"not a ticket", e.agent, id, map[string]any{"ticket": "nope", "status": "succeeded"}, 422, "ticket"},
		{"bad status", e.agent, id, map[string]any{"ticket": ticket, "status": "done"}, 422, "status"},
		{"failed without error", e.agent, id, map[string]any{"ticket": ticket, "status": "failed"}, 422, "error"},
		{"result and digest", e.agent, id, map[string]any{"ticket": ticket, "status": "succeeded", "result": map[string]any{"a": 1}, "result_digest": strings.Repeat("a", 64)}, 422, "result_digest"},
		{"result too large", e.agent, id, map[string]any{"ticket": ticket, "status": "succeeded", "result": map[string]any{"blob": strings.Repeat("x", proposals.MaxReportedResult)}}, 422, "result"},
	} {
		resp, prob := e.report(c.token, c.id, c.body)
		if resp.StatusCode != c.status || !strings.Contains(problemFields(prob), c.field) {
			t.Errorf("%s: %d %v", c.name, resp.StatusCode, prob)
		}
	}
	if _, g := e.api("GET", "/api/v1/proposals/"+id, e.agent, nil); g["status"] != "applying" {
		t.Fatalf("a refused report changed the call: %v", g)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1`, id); n != 0 {
		t.Fatalf("a refused report left receipts: %d", n)
	}

	// The report closes it, with what ran.
	resp, done := e.report(e.agent, id, map[string]any{"ticket": ticket, "status": "succeeded", "result": map[string]any{"sent": true, "number": "INV-1"},
		"arguments": map[string]any{"amount": 120, "invoice": "INV-1"}})
	if resp.StatusCode != http.StatusOK || done["status"] != "applied" || done["execution_ticket"] != nil {
		t.Fatalf("report: %d %v", resp.StatusCode, done)
	}
	if r, _ := done["result"].(map[string]any); r["sent"] != true {
		t.Fatalf("result: %v", done["result"])
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.applied' AND subject_id = $1 AND data->>'reported_by' = 'caller'
		AND data->>'path' = 'auto' AND length(data->>'result_digest') = 64`, id); n != 1 {
		t.Fatalf("audit rows: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1 AND kind = 'execution'`, id); n != 1 {
		t.Fatalf("receipts: %d", n)
	}
	// A ticket is used once.
	resp, again := e.report(e.agent, id, map[string]any{"ticket": ticket, "status": "succeeded"})
	if resp.StatusCode != http.StatusConflict || again["proposal_status"] != "applied" {
		t.Fatalf("second report: %d %v", resp.StatusCode, again)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1`, id); n != 1 {
		t.Fatalf("receipts after a second report: %d", n)
	}
	// A digest instead of the result.
	digest := strings.Repeat("ab", 32)
	if resp, d := e.report(e.agent, id2, map[string]any{"ticket": ticket2, "status": "succeeded", "result_digest": digest}); resp.StatusCode != http.StatusOK ||
		d["result"].(map[string]any)["result_digest"] != digest {
		t.Fatalf("report with a digest: %d %v", resp.StatusCode, d)
	}
}

func TestCallerTools_AHeldCallWaitsForTheOwnerAndTheLongPollBringsTheTicket(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("approve")

	resp, p := e.invoice(calls, "INV-7")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" || p["execution_ticket"] != nil || p["confirm_url"] == nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	id := p["proposal_id"].(string)
	// Nothing to report yet.
	if resp, prob := e.report(e.agent, id, map[string]any{"ticket": strings.Repeat("A", 43), "status": "succeeded"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("report of a pending call: %d %v", resp.StatusCode, prob)
	}
	for _, bad := range []string{"0s", "2m", "soon", "-5s"} {
		if resp, prob := e.api("GET", "/api/v1/proposals/"+id+"?wait="+bad, e.agent, nil); resp.StatusCode != http.StatusUnprocessableEntity || problemFields(prob) != "wait" {
			t.Errorf("wait=%s: %d %v", bad, resp.StatusCode, prob)
		}
	}
	// A short wait on a call nobody decides ends with the call as it is.
	start := time.Now()
	if _, g := e.api("GET", "/api/v1/proposals/"+id+"?wait=1s", e.agent, nil); g["status"] != "pending" || time.Since(start) < time.Second {
		t.Fatalf("an unanswered wait: %v after %s", g, time.Since(start))
	}

	// The owner confirms the card while the agent waits.
	applied := make(chan int, 1)
	go func() {
		time.Sleep(400 * time.Millisecond)
		req, _ := http.NewRequest("POST", e.url+"/api/v1/proposals/"+id+"/apply", nil)
		req.Header.Set("Authorization", "Bearer "+e.user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			applied <- 0
			return
		}
		resp.Body.Close()
		applied <- resp.StatusCode
	}()
	start = time.Now()
	resp, w := e.api("GET", "/api/v1/proposals/"+id+"?wait=30s", e.agent, nil)
	if resp.StatusCode != http.StatusOK || w["status"] != "applying" || w["apply_path"] != "human" || w["execution_ticket"] == nil {
		t.Fatalf("long-poll: %d %v", resp.StatusCode, w)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the long-poll answered after %s", took)
	}
	if code := <-applied; code != http.StatusAccepted {
		t.Fatalf("the owner's apply: %d (the call waits for its caller)", code)
	}
	// Waiting on a status it no longer has answers at once.
	start = time.Now()
	if _, g := e.api("GET", "/api/v1/proposals/"+id+"?wait=30s&status=pending", e.agent, nil); g["status"] != "applying" || time.Since(start) > 5*time.Second {
		t.Fatalf("a stale wait: %v", g)
	}

	resp, done := e.report(e.agent, id, map[string]any{"ticket": w["execution_ticket"], "status": "failed", "error": "the billing system was down"})
	if resp.StatusCode != http.StatusOK || done["status"] != "failed" || done["error"] != "the billing system was down" {
		t.Fatalf("report: %d %v", resp.StatusCode, done)
	}
	// The owner's confirm is their judgment on the call, on its receipt.
	if n := e.count(`SELECT count(*) FROM evidence WHERE proposal_id = $1 AND label = 'approved'`, id); n != 1 {
		t.Fatalf("evidence: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.failed' AND subject_id = $1 AND data->>'path' = 'human'`, id); n != 1 {
		t.Fatalf("audit: %d", n)
	}
}

// ticketOf computes a ticket as docs/caller-tools.md defines it.
func ticketOf(t *testing.T, e *callerEnv, id, token uuid.UUID, args string, expires time.Time) string {
	t.Helper()
	var cursorKey []byte
	if err := e.pool.QueryRow(t.Context(), "SELECT key FROM cursor_keys WHERE id = 1").Scan(&cursorKey); err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, cursorKey)
	m.Write([]byte("gatehouse caller execution ticket v1"))
	key := m.Sum(nil)
	canonical, err := canonjson.Transform([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(canonical)
	m = hmac.New(sha256.New, key)
	m.Write(id[:])
	m.Write(token[:])
	m.Write(digest[:])
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(expires.Unix())))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func TestCallerTools_AnUnreportedTicketIsMarkedFailedAfterItsExpiry(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("auto")
	_, p := e.invoice(calls, "INV-3")
	id := p["proposal_id"].(string)
	expires, _ := time.Parse(time.RFC3339, p["ticket_expires_at"].(string))

	// The ticket is what the document says it is.
	var token uuid.UUID
	var args json.RawMessage
	if err := e.pool.QueryRow(t.Context(), "SELECT proposed_by_token_id, arguments FROM proposals WHERE id = $1", id).Scan(&token, &args); err != nil {
		t.Fatal(err)
	}
	if got := ticketOf(t, e, uuid.MustParse(id), token, string(args), expires); got != p["execution_ticket"] {
		t.Fatalf("the ticket is not HMAC(key, id | token | sha256(JCS(arguments)) | expiry): %s, issued %s", got, p["execution_ticket"])
	}

	if ids, err := e.sweeper.MarkUnreported(t.Context(), time.Now().Add(4*time.Minute)); err != nil || len(ids) != 0 {
		t.Fatalf("before the expiry: %v %v", ids, err)
	}
	// An expired ticket (the call claimed six minutes ago, signed so) is
	// refused, and changes nothing.
	if _, err := e.pool.Exec(t.Context(), "UPDATE proposals SET claimed_at = claimed_at - interval '6 minutes' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	var claimed time.Time
	if err := e.pool.QueryRow(t.Context(), "SELECT claimed_at FROM proposals WHERE id = $1", id).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	old := ticketOf(t, e, uuid.MustParse(id), token, string(args), claimed.Add(proposals.TicketLifetime))
	if resp, prob := e.report(e.agent, id, map[string]any{"ticket": old, "status": "succeeded"}); resp.StatusCode != http.StatusForbidden ||
		problemFields(prob) != "ticket" || !strings.Contains(prob["detail"].(string), "expired") {
		t.Fatalf("an expired ticket: %d %v", resp.StatusCode, prob)
	}
	if _, g := e.api("GET", "/api/v1/proposals/"+id, e.agent, nil); g["status"] != "applying" || g["execution_ticket"] != nil {
		t.Fatalf("after the expiry, before the sweep: %v", g)
	}

	ids, err := e.sweeper.MarkUnreported(t.Context(), time.Now())
	if err != nil || len(ids) != 1 || ids[0].String() != id {
		t.Fatalf("the sweep: %v %v", ids, err)
	}
	if again, err := e.sweeper.MarkUnreported(t.Context(), time.Now().Add(time.Hour)); err != nil || len(again) != 0 {
		t.Fatalf("a second sweep: %v %v", again, err)
	}
	_, g := e.api("GET", "/api/v1/proposals/"+id, e.agent, nil)
	if g["status"] != "failed" || g["error"] != proposals.Unreported {
		t.Fatalf("unreported: %v", g)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.unreported' AND subject_id = $1`, id); n != 1 {
		t.Fatalf("audit: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1 AND kind = 'expiry'`, id); n != 1 {
		t.Fatalf("receipts: %d", n)
	}
	if n := e.count(`SELECT count(*) FROM evidence WHERE proposal_id = $1 AND label = 'violation' AND weight < 0`, id); n != 1 {
		t.Fatalf("evidence: %d", n)
	}
	if resp, prob := e.report(e.agent, id, map[string]any{"ticket": old, "status": "succeeded"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a report after the mark: %d %v", resp.StatusCode, prob)
	}
}

func TestCallerTools_OverMCPRequestPermissionThenReportOutcome(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("auto")
	conv := strings.TrimSuffix(strings.TrimPrefix(calls, "/api/v1/conversations/"), "/tool-calls")
	s := e.mustMCP(e.agent, "billing-agent", map[string]string{"Gatehouse-Conversation": conv})

	list, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	if !names["request_permission"] || !names["report_outcome"] || names["app.send_invoice"] {
		t.Fatalf("tools: %v", names)
	}
	// Gatehouse's own tools are called directly.
	if res, text := callTool(t, s, "request_permission", map[string]any{"tool": "records.put", "arguments": map[string]any{},
		"rationale": "asking before writing a record"}); !res.IsError || !strings.Contains(text, "directly") {
		t.Fatalf("a built-in tool: %v %s", res.IsError, text)
	}

	res, text := callTool(t, s, "request_permission", map[string]any{"tool": "app.send_invoice", "arguments": map[string]any{"invoice": "INV-4", "amount": 80},
		"rationale": "the customer asked for the April invoice"})
	got := structured(t, res)
	if res.IsError || got["status"] != "applying" || got["execution_ticket"] == nil || !strings.Contains(text, "You may run app.send_invoice") {
		t.Fatalf("request_permission: %v %s", got, text)
	}
	report := map[string]any{"proposal_id": got["proposal_id"], "ticket": got["execution_ticket"], "status": "succeeded",
		"result": map[string]any{"sent": true}, "rationale": "the invoice went out to the customer"}
	if res, text := callTool(t, s, "report_outcome", report); res.IsError || structured(t, res)["status"] != "applied" {
		t.Fatalf("report_outcome: %s", text)
	}
	if res, text := callTool(t, s, "report_outcome", report); !res.IsError || !strings.Contains(text, "reported already") {
		t.Fatalf("a second report_outcome: %s", text)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.applied' AND subject_id = $1 AND data->>'rationale' = 'the invoice went out to the customer'`,
		got["proposal_id"]); n != 1 {
		t.Fatalf("audit: %d", n)
	}

	// In a session of its own (a new conversation, approve mode) the call
	// waits for the owner; asked again by its id, it brings the ticket.
	held := e.mustMCP(e.agent, "billing-agent", nil)
	res, text = callTool(t, held, "request_permission", map[string]any{"tool": "app.send_invoice", "arguments": map[string]any{"invoice": "INV-5"},
		"rationale": "the customer asked for the May invoice"})
	waiting := structured(t, res)
	if res.IsError || waiting["status"] != "pending" || waiting["execution_ticket"] != nil || !strings.Contains(text, "Do not run it yet") {
		t.Fatalf("held: %v %s", waiting, text)
	}
	id := waiting["proposal_id"].(string)
	if resp, p := e.api("POST", "/api/v1/proposals/"+id+"/apply", e.user, nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the owner's apply: %d %v", resp.StatusCode, p)
	}
	res, text = callTool(t, held, "request_permission", map[string]any{"proposal_id": id, "rationale": "is the May invoice allowed now"})
	if ok := structured(t, res); res.IsError || ok["execution_ticket"] == nil {
		t.Fatalf("asked again: %v %s", ok, text)
	}
}

// lookupOrder declares the agent's own read, sent with its calls.
var lookupOrder = map[string]any{"description": "Look up an order in the shop's own database.", "effect": "read", "authority": "read",
	"schema": map[string]any{"type": "object", "required": []any{"order"}, "additionalProperties": false,
		"properties": map[string]any{"order": map[string]any{"type": "string"}}}}

// declared proposes a call of the agent's own tool with its declaration.
func (e *callerEnv) declared(calls, tool string, decl, args map[string]any, key string) (*http.Response, map[string]any) {
	e.t.Helper()
	body := map[string]any{"tool": tool, "arguments": args, "rationale": "the customer asked about their order", "declaration": decl}
	if key != "" {
		body["idempotency_key"] = key
	}
	return e.api("POST", calls, e.agent, body)
}

func TestCallerDeclarations_ADeclaredReadRunsAtOnceUnderItsDeclarationAndOneReportClosesIt(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("approve") // a read runs at once in any mode

	resp, p := e.declared(calls, "shop.lookup_order", lookupOrder, map[string]any{"order": "A-1"}, "")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "applying" || p["apply_path"] != "auto" || p["execution_ticket"] == nil ||
		p["effect"] != "read" || p["authority"] != "read" || p["action_class"] != "read.context" || p["risk"] != "low" {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	if d, _ := p["declaration"].(map[string]any); d["description"] != lookupOrder["description"] || d["effect"] != "read" {
		t.Fatalf("the answer's declaration: %v", p["declaration"])
	}
	id := p["proposal_id"].(string)
	// What was declared is kept with the call and in its audit row.
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.created' AND subject_id = $1
		AND data->'declaration'->>'description' = 'Look up an order in the shop''s own database.' AND data->>'action_class' = 'read.context'`, id); n != 1 {
		t.Fatalf("audit: %d", n)
	}
	if _, g := e.api("GET", "/api/v1/proposals/"+id, e.agent, nil); g["execution_ticket"] != p["execution_ticket"] || g["declaration"] == nil {
		t.Fatalf("GET: %v", g)
	}
	// The arguments fit the declared schema.
	if resp, prob := e.declared(calls, "shop.lookup_order", lookupOrder, map[string]any{"order": 7}, ""); resp.StatusCode != http.StatusUnprocessableEntity ||
		problemFields(prob) != "arguments.order" {
		t.Fatalf("arguments against the declared schema: %d %v", resp.StatusCode, prob)
	}
	// A call without the declaration names no tool.
	if resp, _ := e.api("POST", calls, e.agent, map[string]any{"tool": "shop.lookup_order", "arguments": map[string]any{"order": "A-1"},
		"rationale": "the customer asked about their order"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("undeclared: %d", resp.StatusCode)
	}

	resp, done := e.report(e.agent, id, map[string]any{"ticket": p["execution_ticket"], "status": "succeeded", "result": map[string]any{"state": "shipped"},
		"arguments": map[string]any{"order": "A-1"}})
	if resp.StatusCode != http.StatusOK || done["status"] != "applied" || done["execution_ticket"] != nil {
		t.Fatalf("report: %d %v", resp.StatusCode, done)
	}
	if n := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1 AND kind = 'execution'`, id); n != 1 {
		t.Fatalf("receipts: %d", n)
	}
	if resp, again := e.report(e.agent, id, map[string]any{"ticket": p["execution_ticket"], "status": "succeeded"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("a second report: %d %v", resp.StatusCode, again)
	}
}

func TestCallerDeclarations_ADeclaredDestructiveCallWaitsForAPersonWhoSeesTheDeclaration(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	e.env.user("boss@example.com", auth.RoleApprover)
	boss := e.token("boss@example.com", auth.TokenUser)
	calls := e.conversation("auto") // auto applies changes, never a destructive call

	drop := map[string]any{"description": "Delete a branch of the agent's git repository.", "effect": "destructive", "authority": "irreversible",
		"schema": map[string]any{"type": "object", "required": []any{"branch"}, "properties": map[string]any{"branch": map[string]any{"type": "string"}}}}
	args := map[string]any{"branch": "feature/old"}
	// Irreversible: a key, as for any tool of the class.
	if resp, prob := e.declared(calls, "git.delete_branch", drop, args, ""); resp.StatusCode != http.StatusBadRequest || problemFields(prob) != "idempotency_key" {
		t.Fatalf("without a key: %d %v", resp.StatusCode, prob)
	}
	resp, p := e.declared(calls, "git.delete_branch", drop, args, "drop-feature-old-000001")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || p["execution_ticket"] != nil || p["risk"] != "high" ||
		p["action_class"] != "tool.call.local" || !strings.Contains(p["summary"].(string), "Delete a branch of the agent's git repository") {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	id := p["proposal_id"].(string)
	// A retry with the key gets the same call; another declaration under
	// the key is another request.
	if resp, again := e.declared(calls, "git.delete_branch", drop, args, "drop-feature-old-000001"); resp.Header.Get("Idempotent-Replayed") != "true" ||
		again["proposal_id"] != id {
		t.Fatalf("a retry: %d %v", resp.StatusCode, again)
	}
	other := map[string]any{"description": "Delete a branch.", "effect": "destructive", "authority": "irreversible"}
	if resp, prob := e.declared(calls, "git.delete_branch", other, args, "drop-feature-old-000001"); resp.StatusCode != http.StatusUnprocessableEntity ||
		problemFields(prob) != "idempotency_key" {
		t.Fatalf("another declaration under the key: %d %v", resp.StatusCode, prob)
	}

	// The card shows what the caller declared.
	resp, card := e.owner.get("/proposals/" + id + "/card")
	if resp.StatusCode != http.StatusOK || !strings.Contains(card, `data-testid="declaration"`) ||
		!strings.Contains(html.UnescapeString(card), "Declared by its caller: Delete a branch of the agent's git repository. (effect destructive, authority irreversible)") {
		t.Fatalf("card: %d\n%s", resp.StatusCode, card)
	}

	// An approver lets it run; the long-poll brings the ticket.
	if status, out := adminJSON(t, e.env, "POST", "/admin/approvals/"+p["approval_id"].(string)+"/approve", boss, map[string]any{}); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, out)
	}
	_, w := e.api("GET", "/api/v1/proposals/"+id+"?wait=10s", e.agent, nil)
	if w["status"] != "applying" || w["apply_path"] != "approval" || w["execution_ticket"] == nil {
		t.Fatalf("after the approval: %v", w)
	}
	resp, done := e.report(e.agent, id, map[string]any{"ticket": w["execution_ticket"], "status": "succeeded", "result_digest": strings.Repeat("0f", 32)})
	if resp.StatusCode != http.StatusOK || done["status"] != "applied" {
		t.Fatalf("report: %d %v", resp.StatusCode, done)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.applied' AND subject_id = $1 AND data->>'path' = 'approval'
		AND data->>'reported_by' = 'caller'`, id); n != 1 {
		t.Fatalf("audit: %d", n)
	}
}

func TestCallerDeclarations_ADeclarationOnlyTightensThePolicyFile(t *testing.T) {
	t.Parallel()
	e := newCallerEnv(t)
	calls := e.conversation("auto")
	args := map[string]any{"invoice": "INV-8", "amount": 40}

	for _, c := range []struct {
		name, tool string
		decl       map[string]any
		status     int
		fields     string
	}{
		{"a looser effect and authority", "app.send_invoice", map[string]any{"description": "Send an invoice.", "effect": "read", "authority": "read"}, 422,
			"declaration.effect,declaration.authority"},
		{"a looser class", "app.send_invoice", map[string]any{"description": "Send an invoice.", "effect": "mutate", "authority": "write-idempotent",
			"action_class": "draft.compose"}, 422, "declaration.action_class"},
		{"a built-in's name", "records.put", map[string]any{"description": "Put a record.", "effect": "mutate", "authority": "write-idempotent"}, 422, "tool"},
		{"a built-in's group", "records.purge", map[string]any{"description": "Purge records.", "effect": "destructive", "authority": "irreversible"}, 422, "tool"},
		{"an authority that does not fit", "app.note", map[string]any{"description": "Keep a note.", "effect": "read", "authority": "irreversible"}, 422, "declaration.authority"},
		{"no description", "app.note", map[string]any{"description": " ", "effect": "read", "authority": "read"}, 422, "declaration.description"},
		{"a bad effect", "app.note", map[string]any{"description": "Keep a note.", "effect": "write", "authority": "read"}, 422, "declaration.effect"},
		{"an unknown class", "app.note", map[string]any{"description": "Keep a note.", "effect": "mutate", "authority": "write-idempotent", "action_class": "no.such"}, 422,
			"declaration.action_class"},
		{"a schema that is not one", "app.note", map[string]any{"description": "Keep a note.", "effect": "read", "authority": "read",
			"schema": map[string]any{"type": "string"}}, 422, "declaration.schema"},
		{"a schema that loads a file", "app.note", map[string]any{"description": "Keep a note.", "effect": "read", "authority": "read",
			"schema": map[string]any{"type": "object", "$ref": "file:///etc/passwd"}}, 422, "declaration.schema"},
		{"another name", "app.note", map[string]any{"name": "app.other", "description": "Keep a note.", "effect": "read", "authority": "read"}, 422, "declaration.name"},
	} {
		resp, prob := e.declared(calls, c.tool, c.decl, args, "")
		if resp.StatusCode != c.status || problemFields(prob) != c.fields {
			t.Errorf("%s: %d %v", c.name, resp.StatusCode, prob)
		}
	}
	if n := e.count(`SELECT count(*) FROM proposals`); n != 0 {
		t.Fatalf("a refused declaration recorded %d calls", n)
	}

	// A stricter one applies to the call: the file's write-idempotent
	// mutate, declared write-non-idempotent and external, needs a key and
	// keeps the file's schema too.
	stricter := map[string]any{"description": "Send an invoice by email to the customer.", "effect": "mutate", "authority": "write-non-idempotent",
		"action_class": "tool.call.external", "schema": map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"maximum": 100}}}}
	if resp, prob := e.declared(calls, "app.send_invoice", stricter, map[string]any{"amount": 40}, "send-inv-8-0000000001"); resp.StatusCode != http.StatusUnprocessableEntity ||
		problemFields(prob) != "arguments.invoice" {
		t.Fatalf("the file's schema: %d %v", resp.StatusCode, prob)
	}
	if resp, prob := e.declared(calls, "app.send_invoice", stricter, map[string]any{"invoice": "INV-8", "amount": 400}, "send-inv-8-0000000002"); resp.StatusCode != http.StatusUnprocessableEntity ||
		problemFields(prob) != "arguments.amount" {
		t.Fatalf("the declared schema: %d %v", resp.StatusCode, prob)
	}
	if resp, prob := e.declared(calls, "app.send_invoice", stricter, args, ""); resp.StatusCode != http.StatusBadRequest || problemFields(prob) != "idempotency_key" {
		t.Fatalf("the stricter class needs a key: %d %v", resp.StatusCode, prob)
	}
	resp, p := e.declared(calls, "app.send_invoice", stricter, args, "send-inv-8-0000000003")
	if resp.StatusCode/100 != 2 || p["authority"] != "write-non-idempotent" || p["action_class"] != "tool.call.external" {
		t.Fatalf("stricter: %d %v", resp.StatusCode, p)
	}
	// The same call without a declaration is the file's.
	if resp, p := e.invoice(calls, "INV-9"); resp.StatusCode != http.StatusAccepted || p["authority"] != "write-idempotent" || p["declaration"] != nil {
		t.Fatalf("the file's: %d %v", resp.StatusCode, p)
	}
}

func TestCallerDeclarations_APolicyFileMayRefuseThem(t *testing.T) {
	t.Parallel()
	e := newCallerEnvPolicy(t, "caller_declarations: refuse\n"+callerPolicy)
	calls := e.conversation("auto")
	resp, prob := e.declared(calls, "shop.lookup_order", lookupOrder, map[string]any{"order": "A-1"}, "")
	if resp.StatusCode != http.StatusForbidden || problemFields(prob) != "declaration" || !strings.Contains(prob["detail"].(string), "caller_declarations: refuse") {
		t.Fatalf("refused: %d %v", resp.StatusCode, prob)
	}
	// The file's own caller tools stay.
	if resp, p := e.invoice(calls, "INV-1"); resp.StatusCode != http.StatusAccepted || p["execution_ticket"] == nil {
		t.Fatalf("a file's caller tool: %d %v", resp.StatusCode, p)
	}
}

func TestCallerDeclarations_AnUnreportedDeclaredCallIsMarkedAfterItsExpiry(t *testing.T) {
	t.Parallel()
	e := newCallerEnvPolicy(t, "") // no caller tools in the file: only declared ones
	calls := e.conversation("approve")
	_, p := e.declared(calls, "shop.lookup_order", lookupOrder, map[string]any{"order": "A-2"}, "")
	id := p["proposal_id"].(string)
	if _, err := e.pool.Exec(t.Context(), "UPDATE proposals SET claimed_at = claimed_at - interval '6 minutes' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	ids, err := e.sweeper.MarkUnreported(t.Context(), time.Now())
	if err != nil || len(ids) != 1 || ids[0].String() != id {
		t.Fatalf("the sweep: %v %v", ids, err)
	}
	if n := e.count(`SELECT count(*) FROM evidence WHERE proposal_id = $1 AND label = 'violation'`, id); n != 1 {
		t.Fatalf("evidence: %d", n)
	}
}

func TestCallerDeclarations_OverMCPRequestPermissionCarriesTheDeclaration(t *testing.T) {
	t.Parallel()
	e := newCallerEnvPolicy(t, "")
	calls := e.conversation("auto")
	conv := strings.TrimSuffix(strings.TrimPrefix(calls, "/api/v1/conversations/"), "/tool-calls")
	s := e.mustMCP(e.agent, "shop-agent", map[string]string{"Gatehouse-Conversation": conv})

	// Offered without caller tools in the file: a caller may declare its own.
	list, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	if !names["request_permission"] || !names["report_outcome"] {
		t.Fatalf("tools: %v", names)
	}
	if res, text := callTool(t, s, "request_permission", map[string]any{"tool": "records.put", "arguments": map[string]any{},
		"declaration": map[string]any{"description": "Put a record.", "effect": "mutate", "authority": "write-idempotent"},
		"rationale":   "asking before writing a record"}); !res.IsError || !strings.Contains(text, "Gatehouse runs") {
		t.Fatalf("a built-in's name: %s", text)
	}
	res, text := callTool(t, s, "request_permission", map[string]any{"tool": "shop.lookup_order", "arguments": map[string]any{"order": "A-3"},
		"declaration": lookupOrder, "rationale": "the customer asked about their order"})
	got := structured(t, res)
	if res.IsError || got["execution_ticket"] == nil || !strings.Contains(text, "You may run shop.lookup_order") {
		t.Fatalf("request_permission: %v %s", got, text)
	}
	if res, text := callTool(t, s, "report_outcome", map[string]any{"proposal_id": got["proposal_id"], "ticket": got["execution_ticket"],
		"status": "failed", "error": "the shop database timed out", "rationale": "the lookup did not answer"}); res.IsError || structured(t, res)["status"] != "failed" {
		t.Fatalf("report_outcome: %s", text)
	}
}
