package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

func TestUnavailableDatabase_Is503WithRetryAfterNot500(t *testing.T) {
	t.Parallel()
	dead, err := pgxpool.New(context.Background(), "postgres://nobody:x@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{CookieSecure: true}, slog.New(slog.DiscardHandler), dead,
		web.NewServices(dead, slog.New(slog.DiscardHandler), auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	for _, c := range []struct{ method, path, contentType, body string }{
		{"GET", "/api/v1/me", "", ""},
		{"POST", "/api/v1/conversations", "application/json", `{"title": "x"}`},
		{"POST", "/signin", "application/x-www-form-urlencoded", url.Values{"email": {"a@example.com"}, "password": {"x"}}.Encode()},
	} {
		req, _ := http.NewRequest(c.method, hs.URL+c.path, strings.NewReader(c.body))
		if strings.HasPrefix(c.path, "/api/") {
			req.Header.Set("Authorization", "Bearer gh_whatever")
		} else {
			// A browser's same-origin form passes CSRF without a token; a
			// bearer header would not get it past (it skips no check).
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database down: %d, Retry-After %q; want 503 with Retry-After", c.method, c.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

func TestConfirm_AUserTokenConfirmsItsOwnCardButNeverAPacket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	put := func(token, key string) (*http.Response, map[string]any) {
		return e.api("POST", base+"/tool-calls", token, map[string]any{"tool": "records.put", "confirm": true,
			"arguments": map[string]any{"collection": "c", "key": key, "value": map[string]any{}}, "rationale": "the owner asked for it"})
	}
	// The owner's user token: the card the approve mode would show is
	// confirmed at once, and audited as the owner's confirm.
	resp, p := put(user, "mine")
	if resp.StatusCode != http.StatusOK || p["status"] != "applied" || p["apply_path"] != "human" || p["confirm_ignored"] != nil {
		t.Fatalf("user token with confirm: %d %v", resp.StatusCode, p)
	}
	var confirmed bool
	e.pool.QueryRow(t.Context(), "SELECT (data->>'confirmed_by_owner')::bool FROM audit_events WHERE action = 'proposal.created' AND subject_id = $1", p["proposal_id"]).Scan(&confirmed)
	if !confirmed {
		t.Error("the owner's confirm is not in the audit row")
	}
	// An agent token: confirm grants nothing, and the answer says why.
	resp, p = put(agent, "theirs")
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" || !strings.Contains(p["confirm_ignored"].(string), "agent") {
		t.Fatalf("agent token with confirm: %d %v", resp.StatusCode, p)
	}
	// A destructive call still asks the owner in auto mode, and a user's
	// confirm stands in for that card (records.delete is high risk: with
	// high risk auto-approved, the card is all that holds it)...
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})
	setHighRisk := func(auto bool) {
		t.Helper()
		if _, err := e.pool.Exec(t.Context(), "UPDATE workspaces SET auto_approve_high_risk = $1", auto); err != nil {
			t.Fatal(err)
		}
	}
	setHighRisk(true)
	resp, p = e.api("POST", base+"/tool-calls", user, map[string]any{"tool": "records.delete", "confirm": true, "idempotency_key": "delete-mine-00000001",
		"arguments": map[string]any{"collection": "c", "key": "mine"}, "rationale": "the owner asked for it"})
	if resp.StatusCode != http.StatusOK || p["status"] != "applied" {
		t.Fatalf("user confirm of a destructive call: %d %v", resp.StatusCode, p)
	}
	setHighRisk(false)
	// ...but never for an approver: a high-risk mail still waits in a packet.
	resp, p = e.api("POST", base+"/tool-calls", user, map[string]any{"tool": "email.send", "confirm": true, "idempotency_key": "mail-confirmed-00001",
		"arguments": map[string]any{"to": "ana@example.com", "subject": "Hi", "body": "Hello"}, "rationale": "the owner asked for it"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" || !strings.Contains(p["confirm_ignored"].(string), "approver") {
		t.Fatalf("user confirm of a deferred call: %d %v", resp.StatusCode, p)
	}
	// Nor for the principal on a human-only call.
	resp, p = e.api("POST", base+"/tool-calls", user, map[string]any{"tool": "payment.initiate", "confirm": true, "idempotency_key": "pay-confirmed-000001",
		"arguments": map[string]any{"amount": 10, "currency": "EUR", "payee": "ACME"}, "rationale": "the owner asked for it"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("user confirm of a human-only call: %d %v", resp.StatusCode, p)
	}
}

func TestAudit_EveryCallKeepsItsRationaleRefusedOnesToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	e.api("PATCH", base, user, map[string]any{"permission_mode": "auto"})
	// A human-only call (refused to the agent), a webhook off the (empty)
	// allowlist (a broken constraint), and email.send past its per-minute
	// rate limit of 10.
	e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "payment.initiate", "idempotency_key": "pay-refused-00000001",
		"arguments": map[string]any{"amount": 10, "currency": "EUR", "payee": "ACME"}, "rationale": "rationale of the payment"})
	e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "webhook.post", "idempotency_key": "hook-refused-0000001",
		"arguments": map[string]any{"url": "https://example.com/hook", "payload": map[string]any{}}, "rationale": "rationale of the webhook"})
	limited := 0
	for i := range 12 {
		resp, _ := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "email.send", "idempotency_key": "mail-limit-" + strings.Repeat("0", 8) + string(rune('a'+i)),
			"arguments": map[string]any{"to": "ana@example.com", "subject": "Hi", "body": "Hello"}, "rationale": "rationale of the mail"})
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no call was rate limited")
	}
	for _, c := range []struct {
		rationale string
		atLeast   int
	}{{"rationale of the payment", 1}, {"rationale of the webhook", 1}, {"rationale of the mail", 12}} {
		var n int
		e.pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_events WHERE data->>'rationale' = $1", c.rationale).Scan(&n)
		if n < c.atLeast {
			t.Errorf("%d audit rows carry %q, want at least %d", n, c.rationale, c.atLeast)
		}
	}
	var limitedRows int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_events WHERE action = 'proposal.refused' AND data->>'refused' = 'rate_limited'").Scan(&limitedRows)
	if limitedRows != limited {
		t.Errorf("%d rate-limited audit rows for %d rate-limited calls", limitedRows, limited)
	}
}

func TestBulkApprovals_CapTheIDsPerRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	form := url.Values{"action": {"reject"}, "reason": {"no"}}
	for range 101 {
		form.Add("ids", "00000000-0000-0000-0000-000000000000")
	}
	boss.get("/admin/approvals")
	resp, body := boss.postForm("/admin/approvals/bulk", form)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "at most 100") {
		t.Fatalf("101 ids: %d %s", resp.StatusCode, body)
	}
}

func TestLengths_CountCharactersNotBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	resp, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": strings.Repeat("ü", 200)})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a 200-character title of 400 bytes: %d %v", resp.StatusCode, conv)
	}
	base := "/api/v1/conversations/" + conv["id"].(string)
	if resp, m := e.api("POST", base+"/messages", agent, map[string]any{"role": "assistant", "content": strings.Repeat("é", 20000)}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("a 20,000-character message of 40,000 bytes: %d %v", resp.StatusCode, m)
	}
	if resp, _ := e.api("POST", base+"/messages", agent, map[string]any{"role": "assistant", "content": strings.Repeat("é", 20001)}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("20,001 characters: %d", resp.StatusCode)
	}
	if resp, _ := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": strings.Repeat("ü", 201)}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a 201-character title: %d", resp.StatusCode)
	}
}

func TestPreview_TheOwnerSeesWhatAutoModeWouldHaveRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{})
	base := "/api/v1/conversations/" + conv["id"].(string)
	_, p := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "store the note"})
	e.api("POST", "/api/v1/proposals/"+p["proposal_id"].(string)+"/reject", user, map[string]any{"reason": "not that"})
	resp, pv := e.api("GET", base+"/preview?permission_mode=auto", agent, nil)
	if resp.StatusCode != http.StatusOK || pv["would_run"] != float64(1) || pv["ran_without_asking"] != float64(0) {
		t.Fatalf("preview: %d %v", resp.StatusCode, pv)
	}
	page, body := owner.get("/conversations/" + conv["id"].(string) + "/preview?permission_mode=auto")
	if page.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="preview-would-run">1<`) || !strings.Contains(body, "records.put (rejected)") {
		t.Fatalf("the page's preview: %d %s", page.StatusCode, body)
	}
	if _, convPage := owner.get("/conversations/" + conv["id"].(string)); !strings.Contains(convPage, "What would change") {
		t.Fatal("the conversation header offers no preview")
	}
}
