package web_test

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/trust"
)

// connectorToken issues a connector's user token for email.
func (e *env) connectorToken(email string) string {
	e.t.Helper()
	tok, err := e.auth.CreateConnectorToken(context.Background(), email, "test connector")
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// executionReceipt writes the receipt of a call of class, as the
// proposals service does when a call runs.
func (e *env) executionReceipt(class string) string {
	e.t.Helper()
	id, err := receipts.Record(context.Background(), db.New(e.pool), mustUUID(e.t, e.ws), receipts.Content{Kind: receipts.KindExecution, Outcome: "owner",
		ActionClass: class, Tool: "email.send", Actor: receipts.Actor{Kind: "agent"}}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return id.String()
}

// pendingCall has the agent propose records.put in a fresh conversation
// of the token's owner: a pending call of class tool.call.local.
func (e *env) pendingCall(agent string) string {
	e.t.Helper()
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "a call to judge later"})
	if resp.StatusCode != http.StatusAccepted || p["action_class"] != "tool.call.local" {
		e.t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	return p["proposal_id"].(string)
}

func (e *env) auditCount(action string) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE action = $1", action).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestEvidenceAPI_ProvenanceFollowsTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ana@example.com", auth.RoleMember)
	user := e.token("ana@example.com", auth.TokenUser)
	agent := e.token("ana@example.com", auth.TokenAgent)
	connector := e.connectorToken("ana@example.com")

	if _, me := e.api("GET", "/api/v1/me", connector, nil); me["token"].(map[string]any)["connector"] != true {
		t.Fatalf("a connector's /me: %v", me)
	}
	// A person's judgment is the principal's.
	resp, ev := e.api("POST", "/api/v1/evidence", user, map[string]any{"action_class": "draft.compose", "label": "approved", "note": "read it, fine"})
	if resp.StatusCode != http.StatusCreated || ev["provenance"] != "principal" || !near(ev["weight"].(float64), 0.85) || ev["note"] != "read it, fine" {
		t.Fatalf("a user's evidence: %d %v", resp.StatusCode, ev)
	}
	// A connector's weighs 0.3 of it.
	resp, ev = e.api("POST", "/api/v1/evidence", connector, map[string]any{"action_class": "draft.compose", "label": "rejected"})
	if resp.StatusCode != http.StatusCreated || ev["provenance"] != "connector" || !near(ev["weight"].(float64), -0.3) {
		t.Fatalf("a connector's evidence: %d %v", resp.StatusCode, ev)
	}
	// An agent's is model-inferred, about a call it names, once.
	resp, p := e.api("POST", "/api/v1/evidence", agent, map[string]any{"action_class": "tool.call.local", "label": "approved"})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p["detail"].(string), "proposal_id") {
		t.Fatalf("an agent's evidence about nothing: %d %v", resp.StatusCode, p)
	}
	call := e.pendingCall(agent)
	resp, ev = e.api("POST", "/api/v1/evidence", agent, map[string]any{"action_class": "tool.call.local", "label": "approved", "proposal_id": call})
	if resp.StatusCode != http.StatusCreated || ev["provenance"] != "model_inferred" || !near(ev["weight"].(float64), 0.085) || ev["proposal_id"] != call {
		t.Fatalf("an agent's evidence: %d %v", resp.StatusCode, ev)
	}
	if resp, p := e.api("POST", "/api/v1/evidence", agent, map[string]any{"action_class": "tool.call.local", "label": "approved", "proposal_id": call}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("an agent judges a call twice: %d %v", resp.StatusCode, p)
	}
	// The person may judge the same call too, as the principal.
	if resp, ev := e.api("POST", "/api/v1/evidence", user, map[string]any{"action_class": "tool.call.local", "label": "minor_edit", "proposal_id": call}); resp.StatusCode != http.StatusCreated || ev["provenance"] != "principal" {
		t.Fatalf("the person on the same call: %d %v", resp.StatusCode, ev)
	}

	// Refusals name the field and record nothing.
	before := e.evidenceRows()
	for _, c := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"an unknown label", map[string]any{"action_class": "draft.compose", "label": "liked"}, "label"},
		{"a violation", map[string]any{"action_class": "draft.compose", "label": "violation"}, "label"},
		{"an unknown class", map[string]any{"action_class": "rocket.launch", "label": "approved"}, "action_class"},
		{"not dot notation", map[string]any{"action_class": "Rocket", "label": "approved"}, "action_class"},
		{"a malformed proposal id", map[string]any{"action_class": "draft.compose", "label": "approved", "proposal_id": "nope"}, "proposal_id"},
		{"an unknown proposal", map[string]any{"action_class": "draft.compose", "label": "approved", "proposal_id": uuid.NewString()}, "proposal_id"},
		{"a proposal of another class", map[string]any{"action_class": "draft.compose", "label": "approved", "proposal_id": call}, "proposal_id"},
		{"an unknown receipt", map[string]any{"action_class": "draft.compose", "label": "approved", "receipt_id": uuid.NewString()}, "receipt_id"},
		{"a receipt of another class", map[string]any{"action_class": "draft.compose", "label": "approved", "receipt_id": e.executionReceipt("email.send.external")}, "receipt_id"},
		{"a long note", map[string]any{"action_class": "draft.compose", "label": "approved", "note": strings.Repeat("é", 501)}, "note"},
		{"an unknown field", map[string]any{"action_class": "draft.compose", "label": "approved", "weight": 1}, "weight"},
	} {
		resp, p := e.api("POST", "/api/v1/evidence", user, c.body)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(p["detail"].(string)+fieldsOf(p), c.field) {
			t.Errorf("%s: %d %v", c.name, resp.StatusCode, p)
		}
	}
	if after := e.evidenceRows(); after != before {
		t.Fatalf("refused evidence was recorded: %d rows, then %d", before, after)
	}
	// A legacy alias is canonicalised.
	if resp, ev := e.api("POST", "/api/v1/evidence", user, map[string]any{"action_class": "Referral_Ask_Drafting", "label": "held"}); resp.StatusCode != http.StatusCreated || ev["action_class"] != "draft.compose" || ev["weight"].(float64) != 0 {
		t.Fatalf("an alias: %d %v", resp.StatusCode, ev)
	}
	if n := e.auditCount("trust.evidence_recorded"); n != 5 {
		t.Fatalf("%d evidence audit rows, want 5", n)
	}

	// The posterior adds it up: draft.compose has 0.85 for, 0.3 against; the held row is no sample.
	resp, post := e.api("GET", "/api/v1/action-classes/draft.compose/posterior", agent, nil)
	if resp.StatusCode != http.StatusOK || !near(post["alpha"].(float64), 2.85) || !near(post["beta"].(float64), 2.3) || post["samples"].(float64) != 2 ||
		post["tier"] != "learning" || post["graduation_ready"] != false {
		t.Fatalf("posterior: %d %v", resp.StatusCode, post)
	}
	want := trust.ComputePosterior("draft.compose", trust.Tally{Positive: 0.85, Negative: 0.3, Samples: 2}, trust.ThresholdFor("draft.compose", nil), false)
	if !near(post["ci_low"].(float64), want.CILow) || !near(post["ci_high"].(float64), want.CIHigh) || post["threshold"].(map[string]any)["min_samples"].(float64) != 10 {
		t.Fatalf("posterior %v, want %+v", post, want)
	}
	if resp, _ := e.api("GET", "/api/v1/action-classes/rocket.launch/posterior", user, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown class's posterior: %d", resp.StatusCode)
	}
	resp, list := e.api("GET", "/api/v1/action-classes", user, nil)
	classes := map[string]map[string]any{}
	for _, c := range list["action_classes"].([]any) {
		classes[c.(map[string]any)["action_class"].(string)] = c.(map[string]any)
	}
	if resp.StatusCode != http.StatusOK || classes["email.send.external"]["tier"] != "new" || classes["webhook.post"] == nil ||
		classes["tool.call.local"]["samples"].(float64) != 2 || classes["email.send.external"]["threshold"].(map[string]any)["ci_low"].(float64) != 0.92 {
		t.Fatalf("every class: %d %v", resp.StatusCode, list)
	}
}

func (e *env) evidenceRows() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM evidence").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func fieldsOf(p map[string]any) string {
	var out []string
	if errs, ok := p["errors"].([]any); ok {
		for _, fe := range errs {
			out = append(out, fe.(map[string]any)["field"].(string), fe.(map[string]any)["message"].(string))
		}
	}
	return " " + strings.Join(out, " ")
}

func TestViolation_SuspendsTheClassUntilThePrincipalClearsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("root@example.com", auth.RoleAdmin)
	e.user("ana@example.com", auth.RoleMember)
	e.user("bob@example.com", auth.RoleMember)
	admin := e.token("root@example.com", auth.TokenUser)
	ana := e.token("ana@example.com", auth.TokenUser)
	bob := e.token("bob@example.com", auth.TokenUser)
	agent := e.token("ana@example.com", auth.TokenAgent)
	connector := e.connectorToken("ana@example.com")
	sent := e.executionReceipt("email.send.external")
	ws := mustUUID(t, e.ws)
	open := func() bool {
		t.Helper()
		v, err := trust.HasOpenViolation(context.Background(), db.New(e.pool), ws, "email.send.external")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	flag := map[string]any{"category": "wrong_recipient", "reason": "Sent the renewal to the wrong client."}

	for name, tok := range map[string]string{"an agent": agent, "a connector": connector} {
		if resp, _ := e.api("POST", "/api/v1/receipts/"+sent+"/violation", tok, flag); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s flags: %d", name, resp.StatusCode)
		}
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+uuid.NewString()+"/violation", ana, flag); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown receipt: %d", resp.StatusCode)
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+sent+"/violation", ana, map[string]any{"category": "bad vibes", "reason": "x"}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("an unknown category: %d", resp.StatusCode)
	}
	setting, err := receipts.Record(context.Background(), db.New(e.pool), ws, receipts.Content{Kind: receipts.KindSettingChange, Actor: receipts.Actor{Kind: "user"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+setting.String()+"/violation", ana, flag); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a receipt of no class: %d", resp.StatusCode)
	}
	if open() {
		t.Fatal("refused flags opened a violation")
	}

	// A member flags it: the class is suspended.
	resp, v := e.api("POST", "/api/v1/receipts/"+sent+"/violation", ana, flag)
	if resp.StatusCode != http.StatusCreated || v["open"] != true || v["action_class"] != "email.send.external" || v["receipt_id"] != sent {
		t.Fatalf("flag: %d %v", resp.StatusCode, v)
	}
	if !open() {
		t.Fatal("trust.HasOpenViolation is false after a flag")
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+sent+"/violation", bob, flag); resp.StatusCode != http.StatusConflict {
		t.Fatalf("flagged twice: %d", resp.StatusCode)
	}
	_, post := e.api("GET", "/api/v1/action-classes/email.send.external/posterior", agent, nil)
	if post["tier"] != "suspended" || !near(post["beta"].(float64), 3) || post["samples"].(float64) != 1 {
		t.Fatalf("after the flag: %v", post)
	}
	var label, prov string
	var weight float64
	var evReceipt uuid.UUID
	e.pool.QueryRow(t.Context(), "SELECT label, provenance, weight, receipt_id FROM evidence").Scan(&label, &prov, &weight, &evReceipt)
	var kind, change string
	e.pool.QueryRow(t.Context(), "SELECT kind, content->'change'->>'action' || ' ' || (content->'change'->>'receipt_id') FROM receipts WHERE id = $1", evReceipt).Scan(&kind, &change)
	if label != "violation" || prov != "principal" || weight != -1 || kind != "violation" || change != "flagged "+sent {
		t.Fatalf("evidence %s %s %g, its receipt %s %q", label, prov, weight, kind, change)
	}
	if _, list := e.api("GET", "/api/v1/violations?open=true", agent, nil); len(list["violations"].([]any)) != 1 {
		t.Fatalf("open violations: %v", list)
	}

	// Only the principal clears it: an admin, or who flagged it.
	id := v["id"].(string)
	for name, tok := range map[string]string{"another member": bob, "the flagger's agent": agent, "the flagger's connector": connector} {
		if resp, _ := e.api("POST", "/api/v1/violations/"+id+"/clear", tok, map[string]any{"note": "fine now"}); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s clears: %d", name, resp.StatusCode)
		}
	}
	if resp, _ := e.api("POST", "/api/v1/violations/"+id+"/clear", admin, map[string]any{"note": "   "}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a blank note: %d", resp.StatusCode)
	}
	resp, cleared := e.api("POST", "/api/v1/violations/"+id+"/clear", admin, map[string]any{"note": "The recipient list is fixed."})
	if resp.StatusCode != http.StatusOK || cleared["open"] != false || cleared["clear_note"] != "The recipient list is fixed." || cleared["cleared_at"] == nil {
		t.Fatalf("clear: %d %v", resp.StatusCode, cleared)
	}
	if open() {
		t.Fatal("trust.HasOpenViolation is true after the clear")
	}
	if resp, _ := e.api("POST", "/api/v1/violations/"+id+"/clear", admin, map[string]any{"note": "again"}); resp.StatusCode != http.StatusConflict {
		t.Fatalf("cleared twice: %d", resp.StatusCode)
	}
	if resp, _ := e.api("POST", "/api/v1/violations/"+uuid.NewString()+"/clear", admin, map[string]any{"note": "x"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown violation: %d", resp.StatusCode)
	}
	_, post = e.api("GET", "/api/v1/action-classes/email.send.external/posterior", ana, nil)
	if post["tier"] != "learning" || !near(post["beta"].(float64), 3) {
		t.Fatalf("after the clear (the −1 stays): %v", post)
	}
	if _, list := e.api("GET", "/api/v1/violations?open=true", ana, nil); len(list["violations"].([]any)) != 0 {
		t.Fatalf("open violations after the clear: %v", list)
	}
	if _, list := e.api("GET", "/api/v1/violations", ana, nil); len(list["violations"].([]any)) != 1 {
		t.Fatalf("all violations: %v", list)
	}
	var violationReceipts int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM receipts WHERE kind = 'violation' AND action_class = 'email.send.external'").Scan(&violationReceipts)
	if violationReceipts != 2 || e.auditCount("trust.violation_flagged") != 1 || e.auditCount("trust.violation_cleared") != 1 {
		t.Fatalf("%d violation receipts, %d/%d audit rows", violationReceipts, e.auditCount("trust.violation_flagged"), e.auditCount("trust.violation_cleared"))
	}

	// Cleared, the receipt may be flagged again; this time its flagger clears it.
	resp, v = e.api("POST", "/api/v1/receipts/"+sent+"/violation", bob, map[string]any{"category": "leak", "reason": "It also held a price list."})
	if resp.StatusCode != http.StatusCreated || !open() {
		t.Fatalf("flagged again: %d %v", resp.StatusCode, v)
	}
	if resp, _ := e.api("POST", "/api/v1/violations/"+v["id"].(string)+"/clear", bob, map[string]any{"note": "Recalled."}); resp.StatusCode != http.StatusOK || open() {
		t.Fatalf("the flagger clears: %d", resp.StatusCode)
	}
}

func TestThreshold_AdminsOverrideItAndEveryChangeIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("root@example.com", auth.RoleAdmin)
	member := e.user("ana@example.com", auth.RoleMember)
	adminToken := e.token("root@example.com", auth.TokenUser)
	adminAgent := e.token("root@example.com", auth.TokenAgent)
	memberToken := e.token("ana@example.com", auth.TokenUser)
	for i := 0; i < 4; i++ {
		if resp, _ := e.api("POST", "/api/v1/evidence", adminToken, map[string]any{"action_class": "calendar.create", "label": "sent"}); resp.StatusCode != http.StatusCreated {
			t.Fatal("evidence")
		}
	}
	_, post := e.api("GET", "/api/v1/action-classes/calendar.create/posterior", memberToken, nil)
	low := post["ci_low"].(float64) // Beta(6, 2): ≈ 0.47
	if post["tier"] != "learning" || post["threshold"].(map[string]any)["ci_low"].(float64) != 0.88 {
		t.Fatalf("before: %v", post)
	}
	body := map[string]any{"ci_low": 0.4, "min_samples": 4, "reason": "calendar invites have been approved for weeks"}
	for name, tok := range map[string]string{"a member": memberToken, "an admin's agent": adminAgent} {
		if resp, _ := e.api("PUT", "/api/v1/action-classes/calendar.create/threshold", tok, body); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s sets a threshold: %d", name, resp.StatusCode)
		}
	}
	for _, bad := range []map[string]any{{"ci_low": 1, "min_samples": 4, "reason": "calendar invites have been approved for weeks"}, {"ci_low": 0, "min_samples": 4, "reason": "calendar invites have been approved for weeks"},
		{"ci_low": 0.5, "min_samples": 0, "reason": "calendar invites have been approved for weeks"}, {"ci_low": 0.5, "reason": "calendar invites have been approved for weeks"},
		{"ci_low": 0.5, "min_samples": 4}, {"ci_low": 0.5, "min_samples": 4, "reason": "because"}} { // no reason, or one too short
		if resp, _ := e.api("PUT", "/api/v1/action-classes/calendar.create/threshold", adminToken, bad); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("%v: %d", bad, resp.StatusCode)
		}
	}
	if resp, _ := e.api("PUT", "/api/v1/action-classes/rocket.launch/threshold", adminToken, body); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown class: %d", resp.StatusCode)
	}
	if n := e.auditCount("trust.threshold_changed"); n != 0 {
		t.Fatalf("refused changes audited: %d", n)
	}

	// At the boundary: ci_low exactly the threshold, samples exactly the minimum.
	resp, post := e.api("PUT", "/api/v1/action-classes/calendar.create/threshold", adminToken, map[string]any{"ci_low": low, "min_samples": 4, "reason": "calendar invites have been approved for weeks"})
	if resp.StatusCode != http.StatusOK || post["tier"] != "ready" || post["graduation_ready"] != true || post["threshold"].(map[string]any)["ci_low"].(float64) != low {
		t.Fatalf("set: %d %v", resp.StatusCode, post)
	}
	resp, post = e.api("PUT", "/api/v1/action-classes/calendar.create/threshold", adminToken, map[string]any{"ci_low": low, "min_samples": 5, "reason": "calendar invites have been approved for weeks"})
	if resp.StatusCode != http.StatusOK || post["tier"] != "learning" {
		t.Fatalf("one sample short: %d %v", resp.StatusCode, post)
	}
	var oldCI, newCI float64
	var oldN, newN int
	var source string
	rows, err := e.pool.Query(t.Context(), `SELECT (data->'old'->>'ci_low')::float8, (data->'old'->>'min_samples')::int, (data->'new'->>'ci_low')::float8,
		(data->'new'->>'min_samples')::int, data->>'old_source' FROM audit_events WHERE action = 'trust.threshold_changed' AND subject_id = 'calendar.create' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var audited []string
	for rows.Next() {
		rows.Scan(&oldCI, &oldN, &newCI, &newN, &source)
		audited = append(audited, source)
	}
	if n := e.count(`SELECT count(*) FROM audit_events WHERE action = 'trust.threshold_changed' AND data->>'reason' = 'calendar invites have been approved for weeks'`); n != 2 {
		t.Fatalf("%d audit rows carry the reason", n)
	}
	if strings.Join(audited, ",") != "default,workspace" || oldCI != low || oldN != 4 || newCI != low || newN != 5 {
		t.Fatalf("audited %v, last %g/%d → %g/%d", audited, oldCI, oldN, newCI, newN)
	}
	var settingReceipts int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM receipts WHERE kind = 'setting_change' AND action_class = 'calendar.create'").Scan(&settingReceipts)
	if settingReceipts != 2 {
		t.Fatalf("%d setting-change receipts", settingReceipts)
	}

	// The form on /trust: admins only, bad input re-rendered with the field named.
	if _, body := member.get("/trust"); strings.Contains(body, `data-testid="threshold-form"`) {
		t.Fatal("a member sees the threshold form")
	}
	if resp, _ := member.postForm("/trust/thresholds", url.Values{"action_class": {"calendar.create"}, "ci_low": {"0.5"}, "min_samples": {"3"}}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a member posts the form: %d", resp.StatusCode)
	}
	_, page := admin.get("/trust")
	if !strings.Contains(page, `data-testid="threshold-form"`) || !strings.Contains(page, "set for this workspace") {
		t.Fatal("the admin's page lacks the form or the threshold's source")
	}
	resp, page = admin.postForm("/trust/thresholds", url.Values{"action_class": {"calendar.create"}, "ci_low": {"1.5"}, "min_samples": {"many"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "greater than 0 and less than 1") && !strings.Contains(page, "between 0 and 1") ||
		!strings.Contains(page, "whole number") || !strings.Contains(page, `value="1.5"`) {
		t.Fatalf("bad form: %d\n%s", resp.StatusCode, page)
	}
	resp, page = admin.postForm("/trust/thresholds", url.Values{"action_class": {"calendar.create"}, "ci_low": {"0.3"}, "min_samples": {"2"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "say why, in 10 to 500 characters") {
		t.Fatalf("bad form: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = admin.postForm("/trust/thresholds", url.Values{"action_class": {"calendar.create"}, "ci_low": {"0.3"}, "min_samples": {"2"},
		"reason": {"invites are approved as proposed, month after month"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/trust?saved=1") {
		t.Fatalf("the form: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, post := e.api("GET", "/api/v1/action-classes/calendar.create/posterior", memberToken, nil); post["tier"] != "ready" || e.auditCount("trust.threshold_changed") != 3 {
		t.Fatalf("after the form: %v", post)
	}
}

var svgTitle = regexp.MustCompile(`(?s)<svg[^>]*role="img"[^>]*aria-labelledby="chart-tool-call-local-title[^>]*>\s*<title id="chart-tool-call-local-title">([^<]*)</title>`)

func TestTrustPage_DrawsEachClassWithEvidenceAndListsOpenViolations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("root@example.com", auth.RoleAdmin)
	member := e.user("ana@example.com", auth.RoleMember)
	bystander := e.user("bob@example.com", auth.RoleMember)
	ana := e.token("ana@example.com", auth.TokenUser)
	agent := e.token("ana@example.com", auth.TokenAgent)

	if resp, body := member.get("/trust"); resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="/trust"`) || !strings.Contains(body, `data-testid="no-evidence"`) ||
		strings.Contains(body, "<svg") {
		t.Fatalf("an empty /trust: %d", resp.StatusCode)
	}
	// Three approvals and a rejection from the person; the owner rejects a
	// call, which the outcome records as evidence too (from its receipt).
	for _, l := range []string{"approved", "approved", "minor_edit", "rejected"} {
		e.api("POST", "/api/v1/evidence", ana, map[string]any{"action_class": "tool.call.local", "label": l})
	}
	call := e.pendingCall(agent)
	e.api("POST", "/api/v1/evidence", agent, map[string]any{"action_class": "tool.call.local", "label": "approved", "proposal_id": call, "note": "the user said thanks"})
	if resp, _ := e.api("POST", "/api/v1/proposals/"+call+"/reject", ana, map[string]any{"reason": "not now"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	sent := e.executionReceipt("email.send.external")
	e.api("POST", "/api/v1/receipts/"+sent+"/violation", ana, map[string]any{"category": "leak", "reason": "Attached the wrong file."})

	resp, body := member.get("/trust")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/trust: %d", resp.StatusCode)
	}
	m := svgTitle.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no accessible chart for tool.call.local:\n%s", body)
	}
	for _, want := range []string{"tool.call.local: posterior Beta(4.135, 4)", "95 % interval", "threshold ci_low 0.8 with 10 samples", "6 samples, learning"} {
		if !strings.Contains(m[1], want) {
			t.Errorf("the chart's title %q lacks %q", m[1], want)
		}
	}
	for _, want := range []string{
		`<path class="curve" d="M12 128 L`, `<path class="band" d="M`, `<line class="threshold"`, ">threshold 0.8</text>",
		"60 % (3 of 5 judgments", "1 decided by a person", `data-testid="tier">learning</span>`,
		"model_inferred", "the user said thanks", `href="/conversations/`, "#proposal-" + call,
		// The violation: its class's card, suspended, and the list.
		`data-class="email.send.external"`, "suspended: open violation", "Attached the wrong file.", `href="/admin/receipts#` + sent,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/trust lacks %q", want)
		}
	}
	if !strings.Contains(body, `data-testid="clear-violation"`) {
		t.Fatal("/trust does not offer the member who flagged it the clear button")
	}
	if _, body := bystander.get("/trust"); !strings.Contains(body, "Attached the wrong file.") || strings.Contains(body, `data-testid="clear-violation"`) {
		t.Fatal("another member is offered the clear button, or does not see the violation")
	}
	if strings.Count(body, `data-testid="density-chart"`) != 2 {
		t.Errorf("%d charts, want tool.call.local's and email.send.external's", strings.Count(body, `data-testid="density-chart"`))
	}

	// The admin clears it from the page.
	_, body = admin.get("/trust")
	id := regexp.MustCompile(`action="/trust/violations/([0-9a-f-]{36})/clear"`).FindStringSubmatch(body)
	if id == nil {
		t.Fatal("the admin has no clear button")
	}
	resp, body = admin.postForm("/trust/violations/"+id[1]+"/clear", url.Values{"note": {""}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "1 to 500 characters") {
		t.Fatalf("a clear without a note: %d", resp.StatusCode)
	}
	resp, _ = admin.postForm("/trust/violations/"+id[1]+"/clear", url.Values{"note": {"Wrong file removed from the template."}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/trust?cleared=1" {
		t.Fatalf("clear: %d", resp.StatusCode)
	}
	if _, body = admin.get("/trust?cleared=1"); strings.Contains(body, `data-testid="violation"`) || !strings.Contains(body, "no longer suspended") {
		t.Fatal("the violation is still listed after the clear")
	}
}

func TestPosteriorAPI_AClassOutsideTheRegistryWithEvidenceIsFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("ana@example.com", auth.RoleMember)
	user := e.token("ana@example.com", auth.TokenUser)
	// Evidence recorded under a workspace's local class, since removed.
	if err := trust.Record(context.Background(), db.New(e.pool), trust.Evidence{WorkspaceID: mustUUID(t, e.ws), ActionClass: "crm.update",
		Label: trust.LabelApproved, Provenance: trust.ProvenanceReceipt}); err != nil {
		t.Fatal(err)
	}
	if resp, post := e.api("GET", "/api/v1/action-classes/crm.update/posterior", user, nil); resp.StatusCode != http.StatusOK || post["samples"].(float64) != 1 {
		t.Fatalf("a class with evidence: %d %v", resp.StatusCode, post)
	}
	if resp, _ := e.api("GET", "/api/v1/action-classes/crm.delete/posterior", user, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a class with nothing: %d", resp.StatusCode)
	}
	if resp, _ := e.api("PUT", "/api/v1/action-classes/crm.update/threshold", user, map[string]any{"ci_low": 0.5, "min_samples": 3, "reason": "calendar invites have been approved for weeks"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a member's threshold: %d", resp.StatusCode)
	}
}
