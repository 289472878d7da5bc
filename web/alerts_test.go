package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// eraseRegistry is the built-in tools plus t.erase, an irreversible call
// (human-gated: an approver decides each) that fails for the key "bad".
func eraseRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	builtin, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	decls := []tools.Tool{{Name: "t.erase", Effect: policy.EffectDestructive, Description: "Erase a customer.",
		Schema: json.RawMessage(`{"type":"object","required":["key"],"properties":{"key":{"type":"string","description":"whom"}}}`),
		Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityIrreversible, Risk: policy.RiskHigh, ActionClass: "proposal.submit",
			Idempotency: tools.Idempotency{Required: true}, Gating: tools.Gating{Required: true},
			RateLimits: tools.RateLimits{PerAgentPerMinute: 10}, // two erasures in a minute: more than the class's default
			Summarize:  func(a map[string]any) string { return "Erase " + a["key"].(string) }},
		Execute: func(_ context.Context, _ *db.Queries, _ uuid.UUID, args json.RawMessage) (any, error) {
			if strings.Contains(string(args), `"bad"`) {
				return nil, errors.New("the customer is under legal hold")
			}
			return map[string]any{"erased": true}, nil
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

// outboxFor waits for n messages to email (the notifications sender runs
// every second; without SMTP its mail waits in the outbox) and returns
// their subjects and bodies.
func (e *env) outboxFor(email string, n int) []string {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows, err := e.pool.Query(e.t.Context(), `SELECT subject || E'\n' || body FROM outbox WHERE recipient = $1 ORDER BY id`, email)
		if err != nil {
			e.t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var s string
			rows.Scan(&s)
			out = append(out, s)
		}
		rows.Close()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAlerts_EveryIrreversibleCallThatRanOrFailedAlertsTheAdmins(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), eraseRegistry(t))
	e.user("root@example.com", auth.RoleAdmin)
	e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	boss := e.token("boss@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	erase := func(key string) string {
		resp, p := e.api("POST", calls, agent, map[string]any{"tool": "t.erase", "arguments": map[string]any{"key": key},
			"rationale": "the customer asked to be forgotten", "idempotency_key": "erase-" + key + "-0000000001"})
		if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" {
			t.Fatalf("propose: %d %v", resp.StatusCode, p)
		}
		status, out := adminJSON(t, e, "POST", "/admin/approvals/"+p["approval_id"].(string)+"/approve", boss, map[string]any{})
		if status != http.StatusOK {
			t.Fatalf("approve: %d %v", status, out)
		}
		return p["proposal_id"].(string)
	}
	ran, failed := erase("ana"), erase("bad")

	// Alerts that come at once share a message.
	all := strings.Join(e.outboxFor("root@example.com", 1), "\n====\n")
	for e.count(`SELECT count(*) FROM notifications WHERE kind = 'alert' AND status = 'sent'`) < 2 && !strings.Contains(all, "Erase bad") {
		all = strings.Join(e.outboxFor("root@example.com", 2), "\n====\n")
	}
	for _, want := range []string{"An irreversible call ran", "Erase ana", "An irreversible call failed", "Erase bad", "Error: ",
		"/audit?object=" + ran, "/audit?object=" + failed, "The agent's rationale: the customer asked to be forgotten"} {
		if !strings.Contains(all, want) {
			t.Errorf("the alerts do not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, `"ana"`) || strings.Contains(all, "/l/") {
		t.Errorf("an alert carries the arguments or a one-time link:\n%s", all)
	}
	// Only admins are paged: the approver was told of the packets (to
	// decide them), not of what ran.
	for _, m := range e.outboxFor("boss@example.com", 2) {
		if strings.Contains(m, "irreversible call") {
			t.Errorf("the approver was alerted: %s", m)
		}
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE kind = 'alert' AND status = 'sent'`); n != 2 {
		t.Errorf("%d alerts sent", n)
	}
}

func TestAlerts_RationaleWarnModeAlertsOncePerCallerAndDay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	e.user("owner@example.com", auth.RoleMember)
	first, second := e.token("owner@example.com", auth.TokenAgent), e.token("owner@example.com", auth.TokenAgent)
	person := e.token("owner@example.com", auth.TokenUser) // sets the conversations' modes
	admin.get("/admin/settings")
	until := time.Now().AddDate(0, 0, 3).UTC().Format(time.DateOnly)
	if resp, _ := admin.postForm("/admin/settings", url.Values{"rationale_min_length": {"10"}, "rationale_mode": {"warn"}, "rationale_warn_until": {until}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set warn: %d", resp.StatusCode)
	}
	// The first caller's calls run at once (each one audit row says it
	// was warned), the second caller's waits (its created row does).
	for i, tok := range []string{first, first, first, second} {
		mode := map[bool]string{true: "auto", false: "approve"}[tok == first]
		_, conv := e.api("POST", "/api/v1/conversations", person, map[string]any{})
		if resp, p := e.api("PATCH", "/api/v1/conversations/"+conv["id"].(string), person, map[string]any{"permission_mode": mode}); resp.StatusCode != http.StatusOK {
			t.Fatalf("set %s: %d %v", mode, resp.StatusCode, p)
		}
		resp, body := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", tok, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{"i": i}}, "rationale": "short"})
		if want := map[string]int{"auto": 200, "approve": 202}[mode]; resp.StatusCode != want || resp.Header.Get("Warning") == "" {
			t.Fatalf("call %d (%s): %d %v", i, mode, resp.StatusCode, body)
		}
	}
	e.outboxFor("admin@example.com", 1)
	time.Sleep(1500 * time.Millisecond) // a third would have come by now
	mail := strings.Join(e.outboxFor("admin@example.com", 0), "\n====\n")
	if n := strings.Count(mail, "first such call from it today"); n != 2 || !strings.Contains(mail, "without the rationale strict mode requires") ||
		!strings.Contains(mail, "leave out rationales in warn mode") {
		t.Fatalf("%d rationale alerts for two callers, want 2:\n%s", n, mail)
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE kind = 'rationale'`); n != 2 {
		t.Errorf("%d rationale notifications", n)
	}
	if n := e.count(`SELECT count(*) FROM rationale_alerts`); n != 2 {
		t.Errorf("%d callers remembered", n)
	}
}
