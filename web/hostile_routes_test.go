package web_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// hostileRoute is a state-changing route and how to reach it: JSON with a
// bearer token (the API, the approvals' JSON) or a form with a session.
type hostileRoute struct {
	method, path string
	// body is a valid body with one string field set to %s (JSON: the
	// value as a JSON literal; form: the value already %-escaped).
	body  string
	form  bool
	token string
}

// fingerprint is the content of every table a request could change, so a
// refused request is seen to have written nothing. Sessions are left out:
// loading a page may touch the visitor's own session.
func fingerprint(t *testing.T, e *env) string {
	t.Helper()
	var out strings.Builder
	for _, table := range []string{"workspaces", "users", "workspace_members", "approver_roles", "api_tokens", "conversations", "messages",
		"notebooks", "proposals", "approvals", "approval_votes", "records", "outbox", "idempotency_keys", "rate_counters", "audit_events", "payment_requests",
		"receipts", "evidence", "trust_violations", "trust_thresholds", "feedback", "grants"} {
		var sum string
		row := "t::text"
		if table == "api_tokens" {
			row = "(t.id, t.name, t.revoked_at)::text" // authenticating touches last_used_at
		}
		if table == "receipts" {
			row = "(t.id, t.content, t.redacted_for)::text" // the sequencer chains receipts meanwhile
		}
		err := e.pool.QueryRow(t.Context(), fmt.Sprintf("SELECT coalesce(md5(string_agg(%s, '|' ORDER BY %s)), '') FROM %s t", row, row, table)).Scan(&sum)
		if err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("%s: %v", table, err)
		}
		fmt.Fprintf(&out, "%s=%s ", table, sum)
	}
	return out.String()
}

func TestHostileInput_EveryStateChangingRouteRefusesItAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	owner := e.user("owner@example.com", auth.RoleAdmin)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	boss := e.token("boss@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", user, map[string]any{"title": "c"})
	_, nb := e.api("POST", "/api/v1/notebooks", user, map[string]any{"title": "n"})
	convURL, nbURL := "/api/v1/conversations/"+conv["id"].(string), "/api/v1/notebooks/"+nb["id"].(string)
	_, pending := e.api("POST", convURL+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "a pending call"})
	_, deferred := e.api("POST", convURL+"/tool-calls", agent, map[string]any{"tool": "t.send", "idempotency_key": "send-hostile-0000001",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "a deferred call"})
	prop, packet := "/proposals/"+pending["proposal_id"].(string), "/admin/approvals/"+deferred["approval_id"].(string)
	receipt := e.executionReceipt("email.send.external")
	_, flagged := e.api("POST", "/api/v1/receipts/"+receipt+"/violation", user, map[string]any{"category": "other", "reason": "a violation to clear"})
	violation := flagged["id"].(string)
	_, fb := e.api("POST", "/api/v1/feedback", agent, map[string]any{"attempted_action": "a", "expected_outcome": "b", "actual_outcome": "c",
		"severity": "low", "rationale": "an item to triage"})
	var tokenID string
	if err := e.pool.QueryRow(t.Context(), "SELECT id::text FROM api_tokens WHERE name = 'test agent' LIMIT 1").Scan(&tokenID); err != nil {
		t.Fatal(err)
	}
	_, grant := e.api("POST", "/api/v1/grants", user, map[string]any{"tool": "records.put", "conversation_id": conv["id"], "duration_minutes": 30, "max_calls": 3})
	toolCall := `{"tool": "records.put", "arguments": {"collection": "c", "key": %s, "value": {}}, "rationale": "a hostile call"}`
	routes := []hostileRoute{
		{"POST", "/api/v1/conversations", `{"title": %s}`, false, user},
		{"PATCH", convURL, `{"title": %s}`, false, user},
		{"POST", convURL + "/messages", `{"role": "assistant", "content": %s}`, false, agent},
		{"POST", convURL + "/tool-calls", toolCall, false, agent},
		{"POST", "/api/v1/notebooks", `{"title": %s}`, false, user},
		{"PATCH", nbURL, `{"title": %s}`, false, user},
		{"POST", nbURL + "/tool-calls", toolCall, false, agent},
		{"POST", "/api/v1/decisions", `{"conversation_id": "` + conv["id"].(string) + `", "tool": "records.put", "arguments": {"collection": "c", "key": %s, "value": {}}}`, false, agent},
		{"POST", "/api/v1" + prop + "/apply", `{"arguments": {"collection": "c", "key": %s, "value": {}}}`, false, user},
		{"POST", "/api/v1" + prop + "/reject", `{"reason": %s}`, false, user},
		{"POST", "/api/v1" + prop + "/performed", `{"note": %s}`, false, user},
		{"POST", "/api/v1" + prop + "/outcome", `{"status": "succeeded", "ticket": %s}`, false, agent},
		{"POST", packet + "/approve", `{"constraints": [{"kind": "recipient_allowlist", "values": [%s]}]}`, false, boss},
		{"POST", "/api/v1/receipts/00000000-0000-4000-8000-000000000000/redact", `{"redacted_for": %s}`, false, user},
		{"POST", "/api/v1/receipts/verifications", `{"note": %s}`, false, user},
		{"POST", packet + "/reject", `{"reason": %s}`, false, boss},
		{"POST", "/api/v1/evidence", `{"action_class": %s, "label": "approved"}`, false, user},
		{"POST", "/api/v1/receipts/" + receipt + "/violation", `{"category": "other", "reason": %s}`, false, user},
		{"POST", "/api/v1/violations/" + violation + "/clear", `{"note": %s}`, false, user},
		{"POST", "/api/v1/feedback", `{"attempted_action": %s, "expected_outcome": "b", "actual_outcome": "c", "severity": "low", "rationale": "a hostile report"}`, false, agent},
		{"PUT", "/api/v1/action-classes/tool.call.local/threshold", `{"min_samples": 10, "ci_low": %s}`, false, user},
		// (Their "tool" key is there for the duplicate-key case.)
		{"POST", "/mcp", `{"tool": "x", "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": %s, "version": "1"}}}`, false, agent},
		{"DELETE", "/mcp", `{"tool": "x", "session": %s}`, false, agent},
		// Browser forms, with the session's CSRF token.
		{"POST", "/conversations", "title=%s", true, ""},
		{"POST", "/conversations/" + conv["id"].(string) + "/mode", "permission_mode=%s", true, ""},
		{"POST", "/conversations/" + conv["id"].(string) + "/environment", "environment=%s", true, ""},
		{"POST", "/conversations/" + conv["id"].(string) + "/messages", "content=%s", true, ""},
		{"POST", "/conversations/" + conv["id"].(string) + "/chat/stop", "turn_id=%s", true, ""},
		{"POST", "/conversations/" + conv["id"].(string) + "/chat/settings", "model=%s&token_budget=1", true, ""},
		{"POST", convURL + "/turns/00000000-0000-4000-8000-000000000000/stop", `{"note": %s}`, false, user},
		{"POST", "/notebooks", "title=%s", true, ""},
		{"POST", "/notebooks/" + nb["id"].(string) + "/trust", "trust_level=%s", true, ""},
		{"POST", "/notebooks/" + nb["id"].(string) + "/environment", "environment=%s", true, ""},
		{"POST", "/notebooks/" + nb["id"].(string) + "/cells", "tool=records.put&rationale=a+hostile+cell&arg.collection=c&arg.key=%s", true, ""},
		{"POST", prop + "/apply", "arg.collection=c&arg.key=%s", true, ""},
		{"POST", prop + "/reject", "reason=%s", true, ""},
		{"POST", prop + "/performed", "note=%s", true, ""},
		{"POST", "/admin/settings", "internal_domains=%s", true, ""},
		{"POST", "/admin/policy/replay", "period=7d&policy=%s", true, ""},
		{"POST", "/admin/approver-roles", "email=boss%%40example.com&role=%s", true, ""},
		{"POST", "/admin/approver-roles/revoke", "email=boss%%40example.com&role=%s", true, ""},
		{"POST", "/admin/approvals/bulk", "action=reject&reason=%s&ids=" + deferred["approval_id"].(string), true, ""},
		{"POST", packet + "/approve", "recipient_allowlist=%s", true, ""},
		{"POST", packet + "/reject", "reason=%s", true, ""},
		{"POST", "/admin/proposals/" + pending["proposal_id"].(string) + "/settle", "ran=no&note=%s", true, ""},
		{"POST", "/trust/thresholds", "action_class=%s&ci_low=0.9&min_samples=10", true, ""},
		{"POST", "/trust/violations/" + violation + "/clear", "note=%s", true, ""},
		{"POST", "/signin", "email=%s&password=x", true, ""},
		{"POST", "/admin/feedback/" + fb["id"].(string) + "/status", "status=triaged&note=%s", true, ""},
		{"POST", "/tokens", "kind=agent&name=%s", true, ""},
		{"POST", "/oauth/register", `{"tool": "x", "client_name": %s, "redirect_uris": ["https://a.example/cb"]}`, false, ""},
		{"POST", "/oauth/token", "grant_type=authorization_code&client_id=%s", true, ""},
		{"POST", "/oauth/authorize", "decision=approve&client_id=%s", true, ""},
		{"POST", "/tokens/" + tokenID + "/revoke", "note=%s", true, ""},
		{"POST", "/settings/notifications", "email=1&webhook_url=%s", true, ""},
		{"POST", "/l/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "action=approve&reason=%s", true, ""},
		{"POST", "/admin/upstreams/files/refresh", "note=%s", true, ""},
		{"POST", "/admin/upstreams/files/tools/greet/accept", "hash=%s", true, ""},
		{"POST", "/api/v1/grants", `{"tool": %s, "conversation_id": "` + conv["id"].(string) + `", "duration_minutes": 30, "max_calls": 3}`, false, user},
		{"POST", "/api/v1/grants/" + grant["id"].(string) + "/revoke", `{"reason": %s}`, false, user},
		{"POST", "/grants/" + grant["id"].(string) + "/revoke", "note=%s", true, ""},
	}
	// Every state-changing route is in the table (sign-out, which takes
	// no input, aside).
	covered := map[string]bool{"POST /signout": true, "PUT /api/v1/action-classes/:class/threshold": true}
	for _, r := range routes {
		covered[r.method+" "+routePattern(r.path)] = true
	}
	covered["POST /api/v1/conversations/:id/turns/:turn_id/stop"] = covered["POST /api/v1/conversations/:id/turns/:id/stop"]
	covered["POST /l/:token"] = covered["POST /l/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]
	covered["POST /admin/upstreams/:upstream/refresh"] = covered["POST /admin/upstreams/files/refresh"]
	covered["POST /admin/upstreams/:upstream/tools/:tool/accept"] = covered["POST /admin/upstreams/files/tools/greet/accept"]
	for _, r := range e.srv.Routes() {
		if (r.Method == "POST" || r.Method == "PATCH" || r.Method == "PUT" || r.Method == "DELETE") && !covered[r.Method+" "+r.Path] {
			t.Errorf("the hostile-input table lacks %s %s", r.Method, r.Path)
		}
	}

	jsonHostile := map[string]func(string) string{
		"a NUL escape":           func(b string) string { return fmt.Sprintf(b, `"a\u0000b"`) },
		"a raw NUL":              func(b string) string { return fmt.Sprintf(b, "\"a\x00b\"") },
		"invalid UTF-8":          func(b string) string { return fmt.Sprintf(b, "\"a\xff\xfeb\"") },
		"a lone surrogate":       func(b string) string { return fmt.Sprintf(b, `"a\ud800b"`) },
		"a reversed surrogate":   func(b string) string { return fmt.Sprintf(b, `"\udc00\ud800"`) },
		"a number over float64":  func(b string) string { return fmt.Sprintf(b, `1e400`) },
		"a 400-digit number":     func(b string) string { return fmt.Sprintf(b, strings.Repeat("9", 400)) },
		"nesting past the limit": func(b string) string { return fmt.Sprintf(b, strings.Repeat("[", 40)+strings.Repeat("]", 40)) },
		"trailing data":          func(b string) string { return fmt.Sprintf(b, `"ok"`) + ` {"title": "x"}` },
		"a duplicate key": func(b string) string {
			valid := fmt.Sprintf(b, `"ok"`)
			first := valid[1 : len(valid)-1]
			if i := strings.Index(valid, ","); i > 0 {
				first = valid[1:i]
			}
			return "{" + first + ", " + valid[1:]
		},
		"a duplicate key in args": func(b string) string {
			return strings.Replace(fmt.Sprintf(b, `"ok"`), `{`, `{"tool": "records.get", `, 1)
		},
	}
	formHostile := map[string]string{
		"a NUL":              "a%00b",
		"invalid UTF-8":      "a%FF%FEb",
		"a control char":     "a%1Bb",
		"a malformed escape": "a%zzb",
	}
	// What the fixture's waiting calls start in the background (their
	// notifications, held in the outbox without a mail server) settles
	// first: after this, only the hostile requests could change a table.
	waitFor(t, "the fixture's notifications to be sent", func() bool {
		var pending int
		var behind bool
		err := e.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM notifications WHERE status IN ('queued', 'sending')),
			(SELECT f.folded_to < (SELECT coalesce(max(id), 0) FROM audit_events) FROM rollup_feeds f WHERE f.feed = 'notifications')`).Scan(&pending, &behind)
		return err == nil && pending == 0 && !behind
	})
	before := fingerprint(t, e)
	owner.get("/conversations")
	for _, r := range routes {
		cases := map[string]string{}
		if r.form {
			for name, v := range formHostile {
				cases[name] = fmt.Sprintf(r.body, v)
			}
		} else {
			for name, f := range jsonHostile {
				cases[name] = f(r.body)
			}
		}
		for name, body := range cases {
			status, ct, resp := sendHostile(t, e, owner, r, strings.NewReader(body), int64(len(body)))
			if status < 400 || status >= 500 || (!r.form && ct != "application/problem+json") {
				t.Errorf("%s %s with %s: %d %s %.200s", r.method, r.path, name, status, ct, resp)
			}
		}
		// A chunked body over the limit is 413 like any other.
		big := io.MultiReader(strings.NewReader(strings.Split(r.body, "%s")[0]), bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20+10)))
		if status, _, resp := sendHostile(t, e, owner, r, big, -1); status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s %s chunked over the limit: %d %.200s", r.method, r.path, status, resp)
		}
	}
	if after := fingerprint(t, e); after != before {
		t.Errorf("hostile requests changed the database:\nbefore %s\nafter  %s", before, after)
	}
}

// sendHostile sends body on r as its caller would, and returns the status,
// the content type and the start of the answer.
func sendHostile(t *testing.T, e *env, browser *client, r hostileRoute, body io.Reader, length int64) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(r.method, e.url+r.path, body)
	req.ContentLength = length
	if length < 0 {
		req.TransferEncoding = []string{"chunked"}
	}
	if r.form {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-CSRF-Token", browser.csrf)
		u, _ := url.Parse(e.url)
		for _, ck := range browser.http.Jar.Cookies(u) {
			req.AddCookie(ck)
		}
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	b := readBody(t, resp)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// routePattern turns a concrete path back into its route (ids → :id).
func routePattern(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if len(p) == 36 && strings.Count(p, "-") == 4 {
			parts[i] = ":id"
		}
	}
	return strings.Join(slices.Clip(parts), "/")
}
