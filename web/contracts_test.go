package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// rawPost sends a JSON body as is and returns the status and the exact bytes.
func rawPost(t *testing.T, url, token, key string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	return resp.StatusCode, resp.Header, []byte(readBody(t, resp))
}

func TestIdempotency_TwentyConcurrentRequestsRunOnceAndShareTheResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Notes"})
	base := "/api/v1/conversations/" + conv["id"].(string)
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})
	e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "create the record first"})

	body := []byte(`{"tool": "notes.append", "arguments": {"collection": "c", "key": "k", "text": "once"}, "rationale": "log the call exactly once"}`)
	const n = 20
	type answer struct {
		status   int
		body     []byte
		replayed bool
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			status, h, b := rawPost(t, e.url+base+"/tool-calls", agent, "note-k-once-000000001", body)
			answers[i] = answer{status, b, h.Get("Idempotent-Replayed") == "true"}
		})
	}
	wg.Wait()
	replays := 0
	for i, a := range answers {
		if a.status != http.StatusOK || !bytes.Equal(a.body, answers[0].body) {
			t.Fatalf("answer %d: %d %s\nfirst: %s", i, a.status, a.body, answers[0].body)
		}
		if a.replayed {
			replays++
		}
	}
	if replays != n-1 {
		t.Fatalf("%d replays, want %d", replays, n-1)
	}
	var notes int
	e.pool.QueryRow(t.Context(), `SELECT jsonb_array_length(notes) FROM records WHERE collection = 'c' AND key = 'k'`).Scan(&notes)
	var applied int
	e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals WHERE tool = 'notes.append'`).Scan(&applied)
	if notes != 1 || applied != 1 {
		t.Fatalf("%d notes and %d proposals, want 1 and 1", notes, applied)
	}

	// The same key with a different request: 422, nothing runs.
	other := bytes.Replace(body, []byte(`"once"`), []byte(`"twice"`), 1)
	if status, _, b := rawPost(t, e.url+base+"/tool-calls", agent, "note-k-once-000000001", other); status != http.StatusUnprocessableEntity || !strings.Contains(string(b), "different request") {
		t.Fatalf("reused key: %d %s", status, b)
	}
	// The same key in the body works like the header.
	withField := []byte(`{"tool": "notes.append", "arguments": {"collection": "c", "key": "k", "text": "once"}, "rationale": "log the call exactly once", "idempotency_key": "note-k-once-000000001"}`)
	if status, h, b := rawPost(t, e.url+base+"/tool-calls", agent, "", withField); status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("key in the body: %d %s", status, b)
	}
	// A tool that needs a key refuses a call without one (400), and a key
	// that does not fit the format (400).
	if status, _, b := rawPost(t, e.url+base+"/tool-calls", agent, "", body); status != http.StatusBadRequest || !strings.Contains(string(b), "idempotency_key") {
		t.Fatalf("missing key: %d %s", status, b)
	}
	if status, _, b := rawPost(t, e.url+base+"/tool-calls", agent, "short", body); status != http.StatusBadRequest {
		t.Fatalf("bad key: %d %s", status, b)
	}
	e.pool.QueryRow(t.Context(), `SELECT jsonb_array_length(notes) FROM records WHERE collection = 'c' AND key = 'k'`).Scan(&notes)
	if notes != 1 {
		t.Fatalf("%d notes after the refused calls, want 1", notes)
	}
}

func TestIdempotency_AKeyStillInFlightIsAConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	body := []byte(`{"tool": "notes.append", "arguments": {"collection": "c", "key": "k", "text": "x"}, "rationale": "log the call exactly once"}`)
	// A first request that holds the key and never finishes (a crashed
	// instance): the hash must be the one the server computes.
	var ws uuid.UUID
	e.pool.QueryRow(t.Context(), "SELECT id FROM workspaces LIMIT 1").Scan(&ws)
	var in map[string]any
	json.Unmarshal(body, &in)
	hash := requestHash(t, conv["id"].(string), in)
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO idempotency_keys (workspace_id, principal, tool, key, request_hash, expires_at)
		VALUES ($1, (SELECT 'token:' || id FROM api_tokens WHERE kind = 'agent'), 'notes.append', 'in-flight-key-000001', $2, now() + interval '1 hour')`, ws, hash); err != nil {
		t.Fatal(err)
	}
	status, h, b := rawPost(t, e.url+base+"/tool-calls", agent, "in-flight-key-000001", body)
	if status != http.StatusConflict {
		t.Fatalf("in flight: %d %s", status, b)
	}
	if h.Get("Retry-After") == "" {
		t.Fatalf("in flight: no Retry-After: %v", h)
	}
}

func TestDecisions_DryRunShowsEveryLayerAndWritesOnlyAnAuditRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	_, nb := e.api("POST", "/api/v1/notebooks", agent, map[string]any{})
	e.api("PATCH", "/api/v1/notebooks/"+nb["id"].(string), user, map[string]any{"trust_level": "autonomous"})
	e.api("PATCH", "/api/v1/conversations/"+conv["id"].(string), user, map[string]any{"permission_mode": "auto"})
	del := map[string]any{"collection": "c", "key": "k"}

	// records.delete is high risk (ADR-036): the scope gate asks the
	// owner, the risk gate an approver, the stricter.
	resp, d := e.api("POST", "/api/v1/decisions", agent, map[string]any{"conversation_id": conv["id"], "tool": "records.delete", "arguments": del})
	layers, _ := d["layers"].([]any)
	if resp.StatusCode != http.StatusOK || d["state"] != "deferred" || d["disposition"] != "defer" || len(layers) != 6 {
		t.Fatalf("conversation delete: %d %v", resp.StatusCode, d)
	}
	names := []string{"scope", "contract", "risk", "class", "constraints", "token"}
	states := []string{"review_required", "allowed", "deferred", "allowed", "allowed", "allowed"}
	for i, l := range layers {
		l := l.(map[string]any)
		if l["layer"] != names[i] || l["state"] != states[i] || l["reason"] == "" {
			t.Errorf("layer %d: %v", i, l)
		}
	}
	resp, d = e.api("POST", "/api/v1/decisions", agent, map[string]any{"notebook_id": nb["id"], "tool": "records.delete", "arguments": del})
	layers, _ = d["layers"].([]any)
	if resp.StatusCode != http.StatusOK || d["state"] != "deferred" || d["disposition"] != "defer" || len(layers) != 6 ||
		layers[0].(map[string]any)["state"] != "allowed" || layers[2].(map[string]any)["state"] != "deferred" {
		t.Fatalf("autonomous notebook delete: %d %v", resp.StatusCode, d)
	}
	// Bad input.
	for _, body := range []map[string]any{
		{"tool": "records.get", "arguments": del},
		{"conversation_id": conv["id"], "notebook_id": nb["id"], "tool": "records.get", "arguments": del},
		{"conversation_id": conv["id"], "tool": "records.get", "arguments": map[string]any{}},
	} {
		if resp, p := e.api("POST", "/api/v1/decisions", agent, body); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%v: %d %v", body, resp.StatusCode, p)
		}
	}
	if resp, _ := e.api("POST", "/api/v1/decisions", agent, map[string]any{"conversation_id": conv["id"], "tool": "rm.rf", "arguments": del}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown tool: %d", resp.StatusCode)
	}
	var proposals, audits int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM proposals").Scan(&proposals)
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_events WHERE action = 'decision.checked'").Scan(&audits)
	if proposals != 0 || audits != 2 {
		t.Fatalf("%d proposals and %d decision audit rows, want 0 and 2", proposals, audits)
	}
}

// Two server instances on one database share the counters: a limit of 3
// per day holds across them.
func TestRateLimit_HoldsAcrossTwoInstances(t *testing.T) {
	t.Parallel()
	url := dbtest.MustURL(t)
	registry, err := tools.NewRegistry(policy.DefaultClasses(), tools.Tool{Name: "limited.put", Effect: policy.EffectRead,
		Description: "A read limited to three calls a day.", Schema: json.RawMessage(`{"type":"object"}`),
		Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityRead, ActionClass: "read.context", RateLimits: tools.RateLimits{PerWorkspacePerDay: 3}},
		Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
			return map[string]any{"ok": true}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	instance := func() *env {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return newEnvWith(t, pool, registry)
	}
	a, b := instance(), instance()
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	_, conv := a.api("POST", "/api/v1/conversations", agent, map[string]any{})
	call := map[string]any{"tool": "limited.put", "arguments": map[string]any{}, "rationale": "count this call please"}
	path := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	for i, inst := range []*env{a, b, a} {
		if resp, p := inst.api("POST", path, agent, call); resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %v", i+1, resp.StatusCode, p)
		}
	}
	resp, p := b.api("POST", path, agent, call)
	if resp.StatusCode != http.StatusTooManyRequests || p["code"] != "rate_limited" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("fourth call: %d %v %v", resp.StatusCode, resp.Header, p)
	}
}

// requestHash is the hash the server keeps for a tool call in a conversation.
func requestHash(t *testing.T, conversationID string, in map[string]any) []byte {
	t.Helper()
	h, err := proposals.RequestHash(map[string]any{"scope": "conversation", "scope_id": conversationID,
		"tool": in["tool"], "arguments": in["arguments"], "rationale": in["rationale"]})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
