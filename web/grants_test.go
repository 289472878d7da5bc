package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// postAPI is e.api for goroutines: it never calls t.Fatal, and reports
// the status and body.
func postAPI(base, path, token string, body any) (int, map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	err = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, err
}

// put is a records.put call's body, key making it unique.
func put(key string) map[string]any {
	return map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": key, "value": map[string]any{"n": 1}},
		"rationale": "keep the record in sync"}
}

// count is a number the database answers.
func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A grant of N calls allows exactly N under 16 concurrent callers spread
// over two instances on one database, and nothing after it is used up;
// a grant revoked on the other instance allows nothing more at once, and
// an expired one nothing either: each such call waits for its owner.
func TestGrants_ExactlyNCallsOnTwoInstancesThenNothingAfterUseRevocationOrExpiry(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	owner := a.token("owner@example.com", auth.TokenUser)
	_, conv := a.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "sync"})
	convID := conv["id"].(string)
	calls := "/api/v1/conversations/" + convID + "/tool-calls"
	grant := func(e *env, n int) string {
		t.Helper()
		resp, g := e.api("POST", "/api/v1/grants", owner, map[string]any{"tool": "records.put", "conversation_id": convID,
			"duration_minutes": 30, "max_calls": n})
		if resp.StatusCode != http.StatusCreated || g["remaining"] != float64(n) || g["status"] != "active" {
			t.Fatalf("grant: %d %v", resp.StatusCode, g)
		}
		return g["id"].(string)
	}
	call := func(e *env, key string) int {
		t.Helper()
		status, p, err := postAPI(e.url, calls, agent, put(key))
		if err != nil || (status == http.StatusOK) != (p["status"] == "applied") {
			t.Fatalf("call %s: %d %v %v", key, status, p, err)
		}
		return status
	}

	const n, callers = 5, 16
	first := grant(a, n)
	var wg sync.WaitGroup
	statuses := make([]int, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := a
			if i%2 == 1 {
				e = b
			}
			var p map[string]any
			statuses[i], p, errs[i] = postAPI(e.url, calls, agent, put(fmt.Sprintf("k%d", i)))
			if errs[i] == nil && statuses[i] != http.StatusOK && statuses[i] != http.StatusAccepted {
				errs[i] = fmt.Errorf("status %d: %v", statuses[i], p)
			}
		}()
	}
	wg.Wait()
	ran := 0
	for i, s := range statuses {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if s == http.StatusOK {
			ran++
		}
	}
	if ran != n {
		t.Fatalf("%d calls ran under a grant of %d (statuses %v)", ran, n, statuses)
	}
	if got := a.count(`SELECT remaining FROM grants WHERE id = $1`, first); got != 0 {
		t.Fatalf("remaining = %d", got)
	}
	if got := a.count(`SELECT count(*) FROM proposals WHERE decision->'grant'->>'id' = $1 AND status = 'applied'`, first); got != n {
		t.Fatalf("%d proposals applied under the grant", got)
	}
	if got := a.count(`SELECT count(*) FROM proposals WHERE conversation_id = $1 AND status = 'pending'`, convID); got != callers-n {
		t.Fatalf("%d calls wait for the owner, want %d", got, callers-n)
	}
	// Used up: the next call, on either instance, waits for its owner.
	if s := call(b, "after-use"); s != http.StatusAccepted {
		t.Fatalf("after the grant was used up: %d", s)
	}

	// Revoked on the other instance: nothing more, at once.
	second := grant(a, 50)
	if s := call(b, "r1"); s != http.StatusOK {
		t.Fatalf("under the second grant: %d", s)
	}
	if resp, g := b.api("POST", "/api/v1/grants/"+second+"/revoke", owner, nil); resp.StatusCode != http.StatusOK || g["status"] != "revoked" {
		t.Fatalf("revoke: %d %v", resp.StatusCode, g)
	}
	if s := call(a, "r2"); s != http.StatusAccepted {
		t.Fatalf("after revocation: %d", s)
	}
	if got := a.count(`SELECT remaining FROM grants WHERE id = $1`, second); got != 49 {
		t.Fatalf("the revoked grant was used after revocation: remaining %d", got)
	}

	// Expired: nothing more either.
	third := grant(b, 50)
	if s := call(a, "x1"); s != http.StatusOK {
		t.Fatalf("under the third grant: %d", s)
	}
	if _, err := a.pool.Exec(context.Background(), `UPDATE grants SET created_at = created_at - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1`, third); err != nil {
		t.Fatal(err)
	}
	if s := call(b, "x2"); s != http.StatusAccepted {
		t.Fatalf("after expiry: %d", s)
	}
	resp, list := a.api("GET", "/api/v1/grants?conversation_id="+convID, owner, nil)
	statusOf := map[string]string{}
	for _, g := range list["grants"].([]any) {
		g := g.(map[string]any)
		statusOf[g["id"].(string)] = g["status"].(string)
	}
	if resp.StatusCode != http.StatusOK || statusOf[first] != "used_up" || statusOf[second] != "revoked" || statusOf[third] != "expired" {
		t.Fatalf("list: %d %v", resp.StatusCode, statusOf)
	}
}

// The grant layer names the grant that let a call through, who granted
// it and what is left; each use is receipted (outcome grant) and audited
// (grant.used, and the call's rows say grant), and none is counted as a
// person's judgment: the class's evidence grows with the approval that
// created the grant, never with its uses. Both kinds: the owner's grant
// for their card, an approver's for packets of their role.
func TestGrants_LayerNamesTheGrantAndUsesAreReceiptedAuditedButNoEvidence(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	ownerPage := e.user("owner@example.com", auth.RoleMember)
	boss := e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "grants"})
	convID := conv["id"].(string)
	calls := "/api/v1/conversations/" + convID + "/tool-calls"
	evidence := func(class string) int {
		return e.count(`SELECT count(*) FROM evidence WHERE action_class = $1`, class)
	}

	// The owner approves a card with "allow similar for 30 minutes, 3 calls".
	resp, p := e.api("POST", calls, agent, put("first"))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	ownerPage.get("/conversations/" + convID)
	r, body := ownerPage.htmx("POST", "/proposals/"+p["proposal_id"].(string)+"/apply",
		url.Values{"grant": {"1"}, "grant_for": {"tool"}, "grant_scope": {"here"}, "grant_minutes": {"30"}, "grant_calls": {"3"}}, nil)
	if r.StatusCode != http.StatusOK || r.Header.Get("HX-Trigger") != "grants-changed" || !strings.Contains(body, `data-status="applied"`) {
		t.Fatalf("approve and grant: %d %q %.300s", r.StatusCode, r.Header.Get("HX-Trigger"), body)
	}
	var grantID string
	if err := e.pool.QueryRow(context.Background(), `SELECT id::text FROM grants WHERE tool = 'records.put' AND max_calls = 3 AND ceiling = 'review_required'
		AND expires_at - created_at = interval '30 minutes'`).Scan(&grantID); err != nil {
		t.Fatalf("the grant: %v", err)
	}
	approvedEvidence := evidence("tool.call.local")
	if approvedEvidence != 1 {
		t.Fatalf("the owner's approval left %d evidence rows", approvedEvidence)
	}
	for i, left := range []int{2, 1, 0} {
		resp, p := e.api("POST", calls, agent, put(fmt.Sprintf("g%d", i)))
		if resp.StatusCode != http.StatusOK || p["status"] != "applied" {
			t.Fatalf("call %d under the grant: %d %v", i, resp.StatusCode, p)
		}
		d := p["decision"].(map[string]any)
		layers := d["layers"].([]any)
		last := layers[len(layers)-1].(map[string]any)
		want := fmt.Sprintf("Grant %s by owner@example.com allows this call instead of waiting for the owner's confirmation: %d of its 3 calls left after this one", grantID, left)
		if d["disposition"] != "grant" || last["layer"] != "grant" || !strings.HasPrefix(last["reason"].(string), want) ||
			d["grant"].(map[string]any)["id"] != grantID || d["grant"].(map[string]any)["left"] != float64(left) {
			t.Fatalf("call %d's decision does not name the grant: %v", i, d)
		}
		id := p["proposal_id"].(string)
		if got := e.count(`SELECT count(*) FROM receipts WHERE proposal_id = $1 AND kind = 'execution' AND content->>'outcome' = 'grant'`, id); got != 1 {
			t.Fatalf("call %d: %d grant receipts", i, got)
		}
		// Its one audit row (it ran at once) names the grant and the path.
		if got := e.count(`SELECT count(*) FROM audit_events WHERE subject_id = $1 AND action = 'proposal.applied' AND data->>'grant_id' = $2
			AND data->>'path' = 'grant'`, id, grantID); got != 1 {
			t.Fatalf("call %d: %d audit rows say grant", i, got)
		}
		if got := e.count(`SELECT count(*) FROM audit_events WHERE subject_id = $1`, id); got != 1 {
			t.Fatalf("call %d: %d audit rows, want one", i, got)
		}
	}
	if got := e.count(`SELECT count(*) FROM audit_events WHERE action = 'grant.used' AND subject_id = $1`, grantID); got != 3 {
		t.Fatalf("%d grant.used rows", got)
	}
	if got := evidence("tool.call.local"); got != approvedEvidence {
		t.Fatalf("uses under the grant counted as evidence: %d rows, want %d", got, approvedEvidence)
	}
	// The card of a call under a grant says so.
	_, card := ownerPage.get("/conversations/" + convID)
	if !strings.Contains(card, "Ran under a grant") {
		t.Fatal("no card says a call ran under a grant")
	}

	// An approver approves a packet with "allow similar", for its role.
	send := func(key string) (*http.Response, map[string]any) {
		return e.api("POST", calls, agent, map[string]any{"tool": "t.send", "arguments": map[string]any{"to": "ana@example.com"},
			"rationale": "the client asked for it", "idempotency_key": key})
	}
	resp, packet := send("send-000000000000001")
	if resp.StatusCode != http.StatusAccepted || packet["status"] != "pending_approval" {
		t.Fatalf("packet: %d %v", resp.StatusCode, packet)
	}
	boss.get("/admin/approvals")
	r, body = boss.htmx("POST", "/admin/approvals/"+packet["approval_id"].(string)+"/approve",
		url.Values{"grant": {"1"}, "grant_for": {"class"}, "grant_scope": {"here"}, "grant_minutes": {"15"}, "grant_calls": {"2"}}, nil)
	if r.StatusCode != http.StatusOK || r.Header.Get("HX-Trigger") != "grants-changed" {
		t.Fatalf("approve the packet and grant: %d %.300s", r.StatusCode, body)
	}
	packetEvidence := evidence("proposal.submit")
	if packetEvidence != 1 {
		t.Fatalf("the approval left %d evidence rows", packetEvidence)
	}
	setRole := func(role string) {
		if _, err := e.pool.Exec(context.Background(), `UPDATE workspace_members SET role = $1 WHERE user_id = (SELECT id FROM users WHERE email = 'boss@example.com')`, role); err != nil {
			t.Fatal(err)
		}
	}
	// Under the grant; not while its approver no longer holds the role;
	// under it again once they do; not once it is used up.
	for i, want := range []string{"grant", "packet", "grant", "packet"} {
		switch i {
		case 1:
			setRole("member")
		case 2:
			setRole("approver")
		}
		resp, p := send(fmt.Sprintf("send-00000000000001%d", i))
		d := p["decision"].(map[string]any)
		switch {
		case want == "grant" && (resp.StatusCode != http.StatusOK || d["grant"] == nil ||
			!strings.Contains(fmt.Sprint(d["layers"]), "by boss@example.com allows this call instead of waiting for an approver")):
			t.Fatalf("send %d under the approver's grant: %d %v", i, resp.StatusCode, p)
		case want == "packet" && (resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval"):
			t.Fatalf("send %d should wait for an approver: %d %v", i, resp.StatusCode, p)
		}
	}
	if got := evidence("proposal.submit"); got != packetEvidence {
		t.Fatalf("sends under the grant counted as evidence: %d rows, want %d", got, packetEvidence)
	}
}

// Bad input, each a clear 4xx naming the field, and nothing written: no
// grant, no audit row, no receipt, no call run.
func TestGrants_BadInputIsRefusedNamingTheFieldAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	ownerPage := e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	e.user("eve@example.com", auth.RoleMember)
	memberPage := ownerPage
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	boss := e.token("boss@example.com", auth.TokenUser)
	eve := e.token("eve@example.com", auth.TokenUser)
	eveAgent := e.token("eve@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "mine"})
	convID := conv["id"].(string)
	_, eveConv := e.api("POST", "/api/v1/conversations", eveAgent, map[string]any{"title": "eve's"})
	calls := "/api/v1/conversations/" + convID + "/tool-calls"
	// A packet the approver approved (plainly), one nobody approved, and
	// a grant of the owner's.
	_, approved := e.api("POST", calls, agent, map[string]any{"tool": "t.send", "arguments": map[string]any{"to": "a@example.com"},
		"rationale": "the client asked for it", "idempotency_key": "send-000000000000001"})
	if resp, _ := e.api("POST", "/admin/approvals/"+approved["approval_id"].(string)+"/approve", boss, map[string]any{}); resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	_, waiting := e.api("POST", calls, agent, map[string]any{"tool": "t.send", "arguments": map[string]any{"to": "b@example.com"},
		"rationale": "the client asked for it", "idempotency_key": "send-000000000000002"})
	resp, mine := e.api("POST", "/api/v1/grants", owner, map[string]any{"tool": "records.put", "conversation_id": convID, "duration_minutes": 15, "max_calls": 1})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a valid grant: %d %v", resp.StatusCode, mine)
	}
	_, pending := e.api("POST", calls, agent, map[string]any{"tool": "records.delete", "arguments": map[string]any{"collection": "c", "key": "k"},
		"rationale": "remove the stale record", "idempotency_key": "delete-0000000000001"})
	_, card := e.api("POST", calls, agent, map[string]any{"tool": "notes.append", "arguments": map[string]any{"collection": "c", "key": "k", "text": "x"},
		"rationale": "note what changed today", "idempotency_key": "append-0000000000001"})

	rows := func() string {
		var s string
		if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM grants)::text || '/' || (SELECT count(*) FROM audit_events)::text
			|| '/' || (SELECT count(*) FROM receipts)::text || '/' || (SELECT count(*) FROM proposals WHERE status = 'applied')::text
			|| '/' || (SELECT coalesce(sum(remaining), 0) FROM grants)::text`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := map[string]any{"tool": "records.put", "conversation_id": convID, "duration_minutes": 30, "max_calls": 3}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
		field                     string
	}{
		{"a destructive tool", "POST", "/api/v1/grants", owner, with("tool", "records.delete"), 422, "tool"},
		{"a payment tool", "POST", "/api/v1/grants", owner, with("tool", "payment.initiate"), 422, "tool"},
		{"a human-only class", "POST", "/api/v1/grants", owner, with("tool", nil, "action_class", "payment.initiate"), 422, "action_class"},
		{"a payment alias", "POST", "/api/v1/grants", owner, with("tool", nil, "action_class", "payment.spend"), 422, "action_class"},
		{"too short", "POST", "/api/v1/grants", owner, with("duration_minutes", 14), 422, "duration_minutes"},
		{"too long", "POST", "/api/v1/grants", owner, with("duration_minutes", 1441), 422, "duration_minutes"},
		{"no calls", "POST", "/api/v1/grants", owner, with("max_calls", 0), 422, "max_calls"},
		{"too many calls", "POST", "/api/v1/grants", owner, with("max_calls", 101), 422, "max_calls"},
		{"a bound of another kind", "POST", "/api/v1/grants", owner, with("bounds", []any{map[string]any{"kind": "dry_run_only"}}), 422, "bounds.0.kind"},
		{"an amount that is not a number", "POST", "/api/v1/grants", owner, with("bounds", []any{map[string]any{"kind": "max_amount", "amount": "lots"}}), 422, "bounds.0.amount"},
		{"a negative amount", "POST", "/api/v1/grants", owner, with("bounds", []any{map[string]any{"kind": "max_amount", "amount": -5}}), 422, "bounds.0"},
		{"an empty allowlist", "POST", "/api/v1/grants", owner, with("bounds", []any{map[string]any{"kind": "domain_allowlist", "values": []string{}}}), 422, "bounds.0"},
		{"both tool and class", "POST", "/api/v1/grants", owner, with("action_class", "tool.call.local"), 422, "tool"},
		{"someone else's conversation", "POST", "/api/v1/grants", owner, with("conversation_id", eveConv["id"]), 404, "conversation_id"},
		{"someone else's token", "POST", "/api/v1/grants", eve, with("conversation_id", nil, "token_id", tokenIDOf(t, e, "owner@example.com", "agent")), 404, "token_id"},
		{"an agent grants", "POST", "/api/v1/grants", agent, base, 403, ""},
		{"a packet the caller did not approve", "POST", "/api/v1/grants", boss, with("tool", "t.send", "approval_id", waiting["approval_id"]), 403, "approval_id"},
		{"a member extends an approval", "POST", "/api/v1/grants", eve, with("tool", "t.send", "approval_id", approved["approval_id"]), 403, "approval_id"},
		{"wider than the packet: another tool", "POST", "/api/v1/grants", boss, with("approval_id", approved["approval_id"]), 422, "tool"},
		{"wider than the packet: another class", "POST", "/api/v1/grants", boss, with("tool", nil, "action_class", "tool.call.local", "approval_id", approved["approval_id"]), 422, "action_class"},
		{"wider than the packet: another scope", "POST", "/api/v1/grants", boss, with("tool", "t.send", "conversation_id", eveConv["id"], "approval_id", approved["approval_id"]), 422, "conversation_id"},
		{"revoking someone else's grant", "POST", "/api/v1/grants/" + mine["id"].(string) + "/revoke", eve, nil, 403, "id"},
		{"an agent revokes", "POST", "/api/v1/grants/" + mine["id"].(string) + "/revoke", agent, nil, 403, ""},
		{"a grant that is not there", "POST", "/api/v1/grants/00000000-0000-4000-8000-000000000000/revoke", owner, nil, 404, ""},
		{"every grant, not an admin", "GET", "/api/v1/grants?all=true", owner, nil, 403, "all"},
	}
	before := rows()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, p := e.api(c.method, c.path, c.token, c.body)
			if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != "application/problem+json" ||
				(c.field != "" && !strings.Contains(fieldsOf(p), " "+c.field+" ")) {
				t.Errorf("%d %v, want %d naming %q", resp.StatusCode, p, c.status, c.field)
			}
			if after := rows(); after != before {
				t.Errorf("wrote something: %s → %s", before, after)
			}
		})
	}

	// On the pages: the card's and the packet's forms, refused with the
	// field named next to the buttons, and the call left as it was.
	memberPage.get("/conversations/" + convID)
	form := func(kv ...string) url.Values {
		v := url.Values{"grant": {"1"}, "grant_for": {"tool"}, "grant_scope": {"here"}, "grant_minutes": {"30"}, "grant_calls": {"3"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	bossPage := e.client()
	bossPage.signIn("boss@example.com", password)
	bossPage.get("/admin/approvals")
	pageCases := []struct {
		name   string
		c      *client
		path   string
		form   url.Values
		status int
		says   string
	}{
		{"no calls", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_calls", "0"), 422, "grant_calls must be from 1 to 100"},
		{"calls not a number", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_calls", "three"), 422, "grant_calls must be a whole number"},
		{"a day and a minute", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_minutes", "1441"), 422, "grant_minutes"},
		{"an amount that cannot be read", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_max_amount", "lots"), 422, "max amount must be a positive number"},
		{"a bound the call breaks", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_recipient_allowlist", "a@example.com"), 422, "grant_recipient_allowlist"},
		{"neither the tool nor the class", memberPage, "/proposals/" + card["proposal_id"].(string) + "/apply", form("grant_scope", "token", "grant_for", "nothing"), 422, "grant_for"},
		// records.delete is high risk: its packet is the approver's.
		{"a destructive call", bossPage, "/admin/approvals/" + pending["approval_id"].(string) + "/approve", form("irreversible_ack", "1"), 422, "destructive calls are never granted"},
		{"a member approves a packet", memberPage, "/admin/approvals/" + waiting["approval_id"].(string) + "/approve", form(), 403, ""},
		{"a packet grant of calls out of range", bossPage, "/admin/approvals/" + waiting["approval_id"].(string) + "/approve", form("grant_calls", "101"), 422, "grant_calls"},
	}
	for _, c := range pageCases {
		t.Run("page: "+c.name, func(t *testing.T) {
			resp, body := c.c.htmx("POST", c.path, c.form, nil)
			if resp.StatusCode != c.status || !strings.Contains(body, c.says) {
				t.Errorf("%d, want %d saying %q: %.400s", resp.StatusCode, c.status, c.says, body)
			}
			if after := rows(); after != before {
				t.Errorf("wrote something: %s → %s", before, after)
			}
		})
	}
	if got := e.count(`SELECT count(*) FROM proposals WHERE (id = $1 AND status = 'pending') OR (id = $2 AND status = 'pending_approval')`, card["proposal_id"], pending["proposal_id"]); got != 2 {
		t.Fatalf("a refused grant ran its call: %d still pending", got)
	}
}

// tokenIDOf is the id of a user's token of a kind.
func tokenIDOf(t *testing.T, e *env, email, kind string) string {
	t.Helper()
	var id string
	if err := e.pool.QueryRow(context.Background(), `SELECT t.id::text FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE u.email = $1 AND t.kind = $2 LIMIT 1`, email, kind).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// The grants page lists a person's grants and revokes them; the scope's
// header counts the live ones and links to them.
func TestGrants_PageListsRevokesAndTheHeaderCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	page := e.user("owner@example.com", auth.RoleMember)
	other := e.user("eve@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "header"})
	convID := conv["id"].(string)
	badge := func() string {
		t.Helper()
		resp, body := page.get("/grants/badge?conversation_id=" + convID)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("badge: %d", resp.StatusCode)
		}
		return body
	}
	if b := badge(); strings.Contains(b, "grant") && strings.Contains(b, "active") {
		t.Fatalf("a badge without grants: %s", b)
	}
	var ids []string
	for _, n := range []int{2, 3} {
		_, g := e.api("POST", "/api/v1/grants", owner, map[string]any{"tool": "records.put", "conversation_id": convID, "duration_minutes": 60, "max_calls": n})
		ids = append(ids, g["id"].(string))
	}
	if b := badge(); !strings.Contains(b, "2 grants active") || !strings.Contains(b, `href="/grants?conversation_id=`+convID+`"`) {
		t.Fatalf("badge: %s", b)
	}
	_, body := page.get("/conversations/" + convID)
	if !strings.Contains(body, `hx-get="/grants/badge?conversation_id=`+convID+`"`) {
		t.Fatal("the conversation's header does not load the count")
	}
	_, body = page.get("/grants?conversation_id=" + convID)
	if strings.Count(body, `data-testid="grant-row"`) != 2 || !strings.Contains(body, "tool records.put") {
		t.Fatalf("grants page: %.500s", body)
	}
	// Someone else can neither see nor revoke them.
	if _, body := other.get("/grants"); strings.Contains(body, `data-testid="grant-row"`) {
		t.Fatal("another member sees the grants")
	}
	other.get("/grants")
	if resp, _ := other.postForm("/grants/"+ids[0]+"/revoke", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another member revoked: %d", resp.StatusCode)
	}
	page.get("/grants")
	if resp, _ := page.postForm("/grants/"+ids[0]+"/revoke", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if b := badge(); !strings.Contains(b, "1 grant active") {
		t.Fatalf("badge after a revoke: %s", b)
	}
	if got := e.count(`SELECT count(*) FROM audit_events WHERE action = 'grant.revoked' AND subject_id = $1`, ids[0]); got != 1 {
		t.Fatalf("%d grant.revoked rows", got)
	}
}

// The grants list reads a page at a time, newest first, with a cursor
// bound to its reader and filter: every grant once over the pages; an
// altered cursor, another person's, or a limit out of range is 422 naming
// the parameter.
func TestGrants_TheListReadsAPageAtATime(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	e.user("eve@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	eve := e.token("eve@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "mine"})
	want := map[string]bool{}
	for _, tool := range []string{"records.put", "notes.append", "records.get"} {
		resp, g := e.api("POST", "/api/v1/grants", owner, map[string]any{"tool": tool, "conversation_id": conv["id"], "duration_minutes": 15, "max_calls": 2})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("grant %s: %d %v", tool, resp.StatusCode, g)
		}
		want[g["id"].(string)] = true
	}
	seen := map[string]bool{}
	path, pages := "/api/v1/grants?limit=2", 0
	for path != "" {
		resp, page := e.api("GET", path, owner, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, page)
		}
		pages++
		for _, g := range page["grants"].([]any) {
			id := g.(map[string]any)["id"].(string)
			if seen[id] {
				t.Errorf("grant %s on two pages", id)
			}
			seen[id] = true
		}
		path = ""
		if next, _ := page["next_cursor"].(string); next != "" {
			path = "/api/v1/grants?limit=2&cursor=" + url.QueryEscape(next)
			if pages == 1 {
				if resp, p := e.api("GET", path, eve, nil); resp.StatusCode != http.StatusUnprocessableEntity || firstField(p) != "cursor" {
					t.Errorf("another person's cursor: %d %v", resp.StatusCode, p)
				}
				if resp, p := e.api("GET", "/api/v1/grants?limit=2&cursor=A"+next[1:], owner, nil); resp.StatusCode != http.StatusUnprocessableEntity || firstField(p) != "cursor" {
					t.Errorf("an altered cursor: %d %v", resp.StatusCode, p)
				}
			}
		}
	}
	if pages != 2 || len(seen) != len(want) {
		t.Fatalf("%d pages with %d grants, want 2 with %d", pages, len(seen), len(want))
	}
	for _, limit := range []string{"0", "201"} {
		if resp, p := e.api("GET", "/api/v1/grants?limit="+limit, owner, nil); resp.StatusCode != http.StatusUnprocessableEntity || firstField(p) != "limit" {
			t.Errorf("limit=%s: %d %v", limit, resp.StatusCode, p)
		}
	}
}
