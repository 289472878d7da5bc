package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// rawAdminPost posts body with the given Content-Type to an admin endpoint
// with a bearer token and returns the status and the decoded answer.
func rawAdminPost(t *testing.T, e *env, path, token, contentType, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	json.Unmarshal([]byte(readBody(t, resp)), &out)
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: %d answered %s, want problem+json", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

func firstField(p map[string]any) string {
	errs, _ := p["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	f, _ := errs[0].(map[string]any)["field"].(string)
	return f
}

func TestApproverInput_OnlyJSONOrAFormAndEveryFieldKnown(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	approver := e.token("boss@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	_, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "the client asked for it", "idempotency_key": "send-ana-00000000001"})
	packet := "/admin/approvals/" + p["approval_id"].(string)

	cases := []struct {
		name, path, contentType, body string
		status                        int
		field                         string
	}{
		{"approve as text", packet + "/approve", "text/plain", `{"constraints": []}`, http.StatusUnsupportedMediaType, ""},
		{"approve as XML", packet + "/approve", "application/xml", `<constraints/>`, http.StatusUnsupportedMediaType, ""},
		{"approve with a body but no type", packet + "/approve", "", `constraints=x`, http.StatusUnsupportedMediaType, ""},
		{"reject as text", packet + "/reject", "text/plain", `Wrong recipient.`, http.StatusUnsupportedMediaType, ""},
		{"an unknown field", packet + "/approve", "application/json", `{"constraint": [{"kind": "dry_run_only"}]}`, http.StatusUnprocessableEntity, "constraint"},
		{"an unknown constraint", packet + "/approve", "application/json", `{"constraints": [{"kind": "spend_limit", "amount": 5}]}`, http.StatusUnprocessableEntity, "constraints.0.kind"},
		{"a malformed constraint", packet + "/approve", "application/json", `{"constraints": [{"kind": "dry_run_only"}, {"kind": "max_amount"}]}`, http.StatusUnprocessableEntity, "constraints.1"},
		{"an unknown field in a constraint", packet + "/approve", "application/json", `{"constraints": [{"kind": "max_amount", "amount": 5, "currency": "EUR"}]}`, http.StatusUnprocessableEntity, "constraints.0.currency"},
		{"trailing data", packet + "/approve", "application/json", `{"constraints": []} {"constraints": []}`, http.StatusBadRequest, ""},
		{"an unknown form field", packet + "/approve", "application/x-www-form-urlencoded", `max_amount=5&spend_limit=3`, http.StatusUnprocessableEntity, "spend_limit"},
		{"a bad form amount", packet + "/approve", "application/x-www-form-urlencoded", `max_amount=lots`, http.StatusUnprocessableEntity, "max_amount"},
		{"reject with an unknown field", packet + "/reject", "application/json", `{"reason": "no", "why": "no"}`, http.StatusUnprocessableEntity, "why"},
	}
	for _, c := range cases {
		status, out := rawAdminPost(t, e, c.path, approver, c.contentType, c.body)
		if status != c.status || (c.field != "" && firstField(out) != c.field) {
			t.Errorf("%s: %d %v, want %d naming %q", c.name, status, out, c.status, c.field)
		}
	}
	// Nothing ran, nobody voted, and the packet still waits.
	var votes, outbox int
	var status string
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM approval_votes").Scan(&votes)
	e.pool.QueryRow(t.Context(), "SELECT status FROM proposals WHERE id = $1", p["proposal_id"]).Scan(&status)
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM outbox WHERE recipient = 'ana@example.com'").Scan(&outbox) // the call's; not the approver's notification
	if votes != 0 || status != "pending_approval" || outbox != 0 {
		t.Fatalf("after refused input: %d votes, proposal %s, %d outbox rows", votes, status, outbox)
	}
	// A form with a constraint is honoured: the dry run takes no effect.
	code, out := rawAdminPost(t, e, packet+"/approve", approver, "application/x-www-form-urlencoded", "dry_run_only=on")
	if code != http.StatusOK || out["proposal"].(map[string]any)["dry_run"] != true {
		t.Fatalf("approve with a form: %d %v", code, out)
	}
}

func TestApplyAPI_AnEditThatNeedsAnApproverAnswers202WithThePacket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	// records.bulk_delete is high risk: auto-approved here, so only its
	// contract's threshold sends it to an approver.
	e.pool.Exec(t.Context(), "UPDATE workspaces SET auto_approve_high_risk = true")
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	resp, p := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.bulk_delete",
		"arguments": map[string]any{"collection": "c", "keys": []string{"a"}}, "rationale": "tidy up the collection", "idempotency_key": "bulk-delete-00000001"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	resp, got := e.api("POST", "/api/v1/proposals/"+p["proposal_id"].(string)+"/apply", user, map[string]any{
		"arguments": map[string]any{"collection": "c", "keys": keys}})
	ed, _ := got["effect_decision"].(map[string]any)
	if resp.StatusCode != http.StatusAccepted || got["status"] != "pending_approval" || got["approval_id"] == nil || ed["state"] != "deferred" {
		t.Fatalf("apply over the threshold: %d %v", resp.StatusCode, got)
	}
	if _, again := e.api("GET", "/api/v1/proposals/"+p["proposal_id"].(string), agent, nil); again["status"] != "pending_approval" || again["effect_decision"] == nil {
		t.Fatalf("the agent reads %v", again)
	}
}

func TestIdempotency_AKeyBelongsToItsCaller(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type caller struct{ agent, user, base string }
	mk := func(email string) caller {
		e.user(email, auth.RoleMember)
		c := caller{agent: e.token(email, auth.TokenAgent), user: e.token(email, auth.TokenUser)}
		_, conv := e.api("POST", "/api/v1/conversations", c.agent, map[string]any{})
		c.base = "/api/v1/conversations/" + conv["id"].(string)
		e.api("PATCH", c.base, c.user, map[string]any{"permission_mode": "auto"})
		e.api("POST", c.base+"/tool-calls", c.agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "create the record first"})
		return c
	}
	ana, bob := mk("ana@example.com"), mk("bob@example.com")
	note := func(text string) []byte {
		return []byte(`{"tool": "notes.append", "arguments": {"collection": "c", "key": "k", "text": "` + text + `"}, "rationale": "log the call exactly once"}`)
	}
	const key = "shared-key-000000001"
	status, _, first := rawPost(t, e.url+ana.base+"/tool-calls", ana.agent, key, note("ana's"))
	if status != http.StatusOK {
		t.Fatalf("ana: %d %s", status, first)
	}
	// Bob uses the same key for his own call: it runs, neither refused as a
	// different request (no squatting) nor answered with Ana's result.
	status, h, body := rawPost(t, e.url+bob.base+"/tool-calls", bob.agent, key, note("bob's"))
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "" || !strings.Contains(string(body), "bob's") {
		t.Fatalf("bob with ana's key: %d %s %s", status, h.Get("Idempotent-Replayed"), body)
	}
	// Bob replaying Ana's exact request gets no replay of her result: her
	// conversation is not his.
	status, _, body = rawPost(t, e.url+ana.base+"/tool-calls", bob.agent, key, note("ana's"))
	if status != http.StatusNotFound || bytes.Contains(body, []byte("ana's")) {
		t.Fatalf("bob replaying ana's request: %d %s", status, body)
	}
	// Ana's own user token is another principal: its own run, not her agent's.
	status, h, _ = rawPost(t, e.url+ana.base+"/tool-calls", ana.user, key, note("ana's"))
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("ana's user token: %d replayed %q", status, h.Get("Idempotent-Replayed"))
	}
	// Ana's agent replaying gets its own first answer, byte for byte.
	status, h, body = rawPost(t, e.url+ana.base+"/tool-calls", ana.agent, key, note("ana's"))
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || !bytes.Equal(body, first) {
		t.Fatalf("ana's replay: %d %q", status, h.Get("Idempotent-Replayed"))
	}
	var ran int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals WHERE tool = 'notes.append' AND status = 'applied'").Scan(&ran)
	if ran != 3 {
		t.Fatalf("%d appends ran, want 3 (ana's agent, bob's agent, ana's user token)", ran)
	}
}

func TestIdempotency_AKeyWhoseRequestDiedAnswersWithTheRealStateAfterItsLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	convID := conv["id"].(string)
	base := "/api/v1/conversations/" + convID
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})
	e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "create the record first"})
	body := []byte(`{"tool": "notes.append", "arguments": {"collection": "c", "key": "k", "text": "x"}, "rationale": "log the call exactly once"}`)
	var in map[string]any
	json.Unmarshal(body, &in)
	hash := requestHash(t, convID, in)
	hold := func(key string, proposal any) {
		t.Helper()
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO idempotency_keys (workspace_id, principal, tool, key, request_hash, expires_at, created_at, proposal_id)
			VALUES ((SELECT id FROM workspaces LIMIT 1), (SELECT 'token:' || id FROM api_tokens WHERE kind = 'agent'), 'notes.append', $1, $2,
			        now() + interval '1 hour', now() - interval '2 minutes', $3)`, key, hash, proposal); err != nil {
			t.Fatal(err)
		}
	}
	// A request that died before it recorded anything: past the lease, the
	// retry takes the key over and runs the call.
	hold("died-early-000000001", nil)
	status, h, b := rawPost(t, e.url+base+"/tool-calls", agent, "died-early-000000001", body)
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "" || !strings.Contains(string(b), `"status":"applied"`) {
		t.Fatalf("a key that recorded nothing: %d %s", status, b)
	}
	// A request that died after claiming its call (an outside effect whose
	// outcome is unknown): the retry reads the call's real state and
	// nothing runs again.
	var stuck string
	if err := e.pool.QueryRow(t.Context(), `UPDATE proposals SET status = 'applying', claimed_at = now(), result = NULL
		WHERE id = (SELECT id FROM proposals WHERE tool = 'notes.append') RETURNING id`).Scan(&stuck); err != nil {
		t.Fatal(err)
	}
	hold("died-late-0000000001", stuck)
	status, h, b = rawPost(t, e.url+base+"/tool-calls", agent, "died-late-0000000001", body)
	if status != http.StatusAccepted || h.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(b), `"status":"applying"`) || !strings.Contains(string(b), stuck) {
		t.Fatalf("a key whose call was claimed: %d %s", status, b)
	}
	var n int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals WHERE tool = 'notes.append'").Scan(&n)
	if n != 1 {
		t.Fatalf("%d notes.append calls, want 1: a retry ran it again", n)
	}
}

func TestOutsideCalls_ASlowWebhookHoldsNoConnection(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	// The test pool is pgxpool's default size (4 on this machine's cores),
	// smaller than the eight calls in flight.
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	// webhook.post is high risk: auto-approved here, so the calls run on
	// the automatic path.
	e.pool.Exec(t.Context(), "UPDATE workspaces SET webhook_allowlist = '{127.0.0.1}', auto_approve_high_risk = true")
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})

	const n = 8
	var wg sync.WaitGroup
	answers := make([]string, n)
	for i := range n {
		wg.Go(func() {
			body := []byte(`{"tool": "webhook.post", "arguments": {"url": "` + slow.URL + `/hook", "payload": {"n": ` + string(rune('0'+i)) + `}}, "rationale": "tell the slow receiver"}`)
			status, _, b := rawPost(t, e.url+base+"/tool-calls", agent, "slow-webhook-00000"+string(rune('a'+i)), body)
			answers[i] = string(rune('0'+status/100)) + " " + string(b)
		})
	}
	// While the eight wait on the receiver, the server answers at once.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		var applying int
		e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals WHERE status = 'applying'").Scan(&applying)
		if applying == n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, path := range []string{"/readyz", "/api/v1/me"} {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+agent)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s while outside calls are slow: %v", path, err)
		}
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusOK || took > time.Second {
			t.Errorf("%s while outside calls are slow: %d in %s", path, resp.StatusCode, took)
		}
	}
	wg.Wait()
	// Each call ends with a definite outcome: delivered just in time, or
	// failed because the receiver did not answer within the webhook's
	// timeout (10 s, the receiver's delay too).
	for i, a := range answers {
		delivered := strings.Contains(a, `"status":"applied"`)
		timedOut := strings.Contains(a, `"status":"failed"`) && strings.Contains(a, "did not answer")
		if !strings.HasPrefix(a, "2 ") || !(delivered || timedOut) {
			t.Errorf("call %d: %s", i, a)
		}
	}
	var applying int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals WHERE status = 'applying'").Scan(&applying)
	if applying != 0 {
		t.Errorf("%d calls left applying", applying)
	}
}
