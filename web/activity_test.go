package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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

// A token revoked on one instance stops at once there and, by the
// revocation's notification, at once on every other (the cache's TTL,
// auth.TokenCacheTTL, bounds it should a notification be lost).
func TestTokens_ARevokedTokenStopsAtOnceOnEveryInstance(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	b := newEnvOn(t, a.pool)
	// b believes a token for a minute: only the revocation's notification
	// can stop it there within this test.
	b.auth.SetTokenCacheTTL(time.Minute)
	a.user("owner@example.com", auth.RoleMember)
	token := a.token("owner@example.com", auth.TokenAgent)
	me := func(e *env) int {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/api/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if me(a) != http.StatusOK || me(b) != http.StatusOK {
		t.Fatal("the token does not work")
	}
	var id uuid.UUID
	a.pool.QueryRow(t.Context(), "SELECT id FROM api_tokens WHERE kind = 'agent'").Scan(&id)
	if err := a.auth.RevokeToken(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if me(a) != http.StatusUnauthorized {
		t.Fatal("the revoking instance still accepts the token")
	}
	// A notification takes milliseconds; the bound is generous for a
	// loaded machine and far inside b's minute of cache.
	deadline := time.Now().Add(5 * time.Second)
	for me(b) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("the other instance still accepts the token 5 s after the revocation")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A class people approved often enough is "ready", and the conversation's
// header says so with a one-click raise.
func TestGraduationHint_AReadyClassOffersToRaiseTheMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "notes"})
	id := conv["id"].(string)
	e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "store the note"})
	page := "/conversations/" + id
	if _, body := owner.get(page); strings.Contains(body, "graduation-hint") {
		t.Fatal("a hint with no evidence")
	}
	// Thirty approvals of the class's calls (what Apply records).
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO evidence (workspace_id, action_class, label, provenance, decision_weight, provenance_weight, weight)
		SELECT id, 'tool.call.local', 'approved', 'receipt', 0.85, 1, 0.85 FROM workspaces, generate_series(1, 30)`); err != nil {
		t.Fatal(err)
	}
	_, body := owner.get(page)
	if !strings.Contains(body, `data-class="tool.call.local"`) || !strings.Contains(body, "30 approvals, 0 edits, 0 rejections") {
		t.Fatalf("no hint for a ready class:\n%s", body)
	}
	resp, _ := owner.postForm(page+"/mode", url.Values{"permission_mode": {"auto"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("raise: %d", resp.StatusCode)
	}
	var mode string
	var receipted int
	e.pool.QueryRow(t.Context(), "SELECT permission_mode FROM conversations WHERE id = $1", id).Scan(&mode)
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM receipts WHERE kind = 'setting_change' AND content->'change'->>'new' = 'auto'").Scan(&receipted)
	if mode != "auto" || receipted != 1 {
		t.Fatalf("after the raise: mode %s, %d receipts", mode, receipted)
	}
	if _, body := owner.get(page); strings.Contains(body, "graduation-hint") {
		t.Fatal("a hint once the mode is auto")
	}
}
