package web_test

import (
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// feedbackBody is a valid feedback item with fields overridden.
func feedbackBody(over map[string]any) map[string]any {
	b := map[string]any{"attempted_action": "search the records for invoices", "expected_outcome": "a list of invoices",
		"actual_outcome": "an empty list", "severity": "med", "rationale": "I could not find the invoices I was asked for"}
	for k, v := range over {
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
	}
	return b
}

func TestFeedback_AgentSubmitsOverRESTAndUnknownToolIsFlagged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	resp, body := e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"tool_called": "records.search", "error_seen": "none"}))
	if resp.StatusCode != http.StatusCreated || body["status"] != "new" || body["submitted_by"] != "agent" || body["tool_known"] != true ||
		body["token_name"] != "test agent" {
		t.Fatalf("submit: %d %v", resp.StatusCode, body)
	}
	resp, body = e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"tool_called": "records.teleport"}))
	if resp.StatusCode != http.StatusCreated || body["tool_known"] != false || body["tool_called"] != "records.teleport" {
		t.Fatalf("unknown tool: %d %v", resp.StatusCode, body)
	}
	// Lengths are characters: 2000 accented letters (4000 bytes) fit.
	resp, body = e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"attempted_action": strings.Repeat("é", 2000)}))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("2000 characters: %d %v", resp.StatusCode, body)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE action = 'feedback.submitted'").Scan(&n); err != nil || n != 3 {
		t.Errorf("audit rows: %d %v", n, err)
	}
}

func TestFeedback_ValidationErrorsNameTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	other := e.token("other@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", other, map[string]any{"title": "theirs"})
	_, prop := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", other, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "a call of someone else"})
	cases := map[string]struct {
		over  map[string]any
		field string
	}{
		"rationale too short":     {map[string]any{"rationale": "short"}, "rationale"},
		"rationale too long":      {map[string]any{"rationale": strings.Repeat("x", 501)}, "rationale"},
		"empty attempted action":  {map[string]any{"attempted_action": "  "}, "attempted_action"},
		"actual outcome too long": {map[string]any{"actual_outcome": strings.Repeat("é", 2001)}, "actual_outcome"},
		"error seen too long":     {map[string]any{"error_seen": strings.Repeat("x", 4001)}, "error_seen"},
		"bad severity":            {map[string]any{"severity": "urgent"}, "severity"},
		"missing severity":        {map[string]any{"severity": nil}, "severity"},
		"malformed proposal":      {map[string]any{"proposal_id": "nope"}, "proposal_id"},
		"someone else's proposal": {map[string]any{"proposal_id": prop["proposal_id"]}, "proposal_id"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp, body := e.api("POST", "/api/v1/feedback", agent, feedbackBody(tc.over))
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("%d %v", resp.StatusCode, body)
			}
			found := false
			for _, f := range body["errors"].([]any) {
				if strings.Contains(f.(map[string]any)["field"].(string), tc.field) {
					found = true
				}
			}
			if !found {
				t.Errorf("the errors do not name %s: %v", tc.field, body["errors"])
			}
		})
	}
	// The owner's own proposal is fine.
	_, mine := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "mine"})
	_, p := e.api("POST", "/api/v1/conversations/"+mine["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "a call of my own"})
	if resp, body := e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"proposal_id": p["proposal_id"]})); resp.StatusCode != http.StatusCreated ||
		body["proposal_id"] != p["proposal_id"] {
		t.Errorf("own proposal: %d %v", resp.StatusCode, body)
	}
}

func TestFeedback_TriageFiltersBySinceAndSeverityNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("boss@example.com", auth.TokenAgent)
	user := e.token("boss@example.com", auth.TokenUser)
	for _, sev := range []string{"low", "high", "high"} {
		e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"severity": sev, "tool_called": "records.search"}))
	}
	// The first one is a month old.
	if _, err := e.pool.Exec(context.Background(), "UPDATE feedback SET created_at = now() - interval '30 days' WHERE severity = 'low'"); err != nil {
		t.Fatal(err)
	}
	resp, body := e.api("GET", "/admin/feedback", user, nil)
	items := body["items"].([]any)
	if resp.StatusCode != http.StatusOK || len(items) != 3 || items[2].(map[string]any)["severity"] != "low" {
		t.Fatalf("all: %d %v", resp.StatusCode, body)
	}
	if g := body["by_tool"].([]any); len(g) != 1 || g[0].(map[string]any)["count"] != float64(3) {
		t.Errorf("by tool: %v", g)
	}
	total := 0.0
	for _, w := range body["weekly"].([]any) {
		total += w.(map[string]any)["count"].(float64)
	}
	if total != 3 {
		t.Errorf("weekly counts add up to %v: %v", total, body["weekly"])
	}
	since := time.Now().AddDate(0, 0, -7).Format("2006-01-02")
	_, body = e.api("GET", "/admin/feedback?since="+since, user, nil)
	if items := body["items"].([]any); len(items) != 2 {
		t.Errorf("since %s: %v", since, items)
	}
	_, body = e.api("GET", "/admin/feedback?severity=low", user, nil)
	if items := body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["severity"] != "low" {
		t.Errorf("severity low: %v", items)
	}
	if resp, body := e.api("GET", "/admin/feedback?since=yesterday", user, nil); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("bad since: %d %v", resp.StatusCode, body)
	}
}

func TestFeedback_MemberAndAgentGet403OnTriage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	member := e.user("member@example.com", auth.RoleMember)
	e.user("admin@example.com", auth.RoleAdmin)
	if resp, _ := member.get("/admin/feedback"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member page: %d", resp.StatusCode)
	}
	if resp, _ := member.get("/admin/feedback.csv"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member CSV: %d", resp.StatusCode)
	}
	if resp, _ := e.api("GET", "/admin/feedback", e.token("member@example.com", auth.TokenUser), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("member token: %d", resp.StatusCode)
	}
	if resp, _ := e.api("GET", "/admin/feedback", e.token("admin@example.com", auth.TokenAgent), nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an admin's agent token: %d", resp.StatusCode)
	}
}

func TestFeedback_StatusTransitionsAreAuditedAndInvalidOnesAre422(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	agent := e.token("admin@example.com", auth.TokenAgent)
	_, it := e.api("POST", "/api/v1/feedback", agent, feedbackBody(nil))
	id := it["id"].(string)
	resp, page := admin.get("/admin/feedback")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "feedback-"+id) || !strings.Contains(page, `role="img"`) {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	move := func(status, note string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", admin.base+"/admin/feedback/"+id+"/status",
			strings.NewReader(url.Values{"status": {status}, "note": {note}, "_csrf": {admin.csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		resp, err := admin.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readBody(t, resp)
	}
	if resp, body := move("done", ""); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "cannot move from new to done") {
		t.Errorf("new → done: %d %s", resp.StatusCode, body)
	}
	if resp, body := move("triaged", "looking at it"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "triaged") || !strings.Contains(body, "looking at it") {
		t.Errorf("new → triaged: %d %s", resp.StatusCode, body)
	}
	if resp, body := move("planned", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, "planned") {
		t.Errorf("triaged → planned: %d %s", resp.StatusCode, body)
	}
	if resp, body := move("new", ""); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("planned → new: %d %s", resp.StatusCode, body)
	}
	rows, err := e.pool.Query(context.Background(), "SELECT data->>'old', data->>'new', actor_kind FROM audit_events WHERE action = 'feedback.status_changed' AND subject_id = $1 ORDER BY id", id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var o, n, k string
		rows.Scan(&o, &n, &k)
		got = append(got, o+">"+n+":"+k)
	}
	if strings.Join(got, " ") != "new>triaged:user triaged>planned:user" {
		t.Errorf("audit rows: %v", got)
	}
}

func TestFeedback_CSVExportHasTheItemsAndGuardsFormulas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	agent := e.token("admin@example.com", auth.TokenAgent)
	e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"attempted_action": `=HYPERLINK("http://evil.example","x")`,
		"expected_outcome": "+1", "actual_outcome": "-2, with \"quotes\"\nand a line", "error_seen": "@SUM(A1)", "severity": "high"}))
	e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"severity": "low"}))
	resp, body := admin.get("/admin/feedback.csv?severity=high")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0][0] != "id" {
		t.Fatalf("the filter keeps one row and the header: %v", recs)
	}
	row := map[string]string{}
	for i, h := range recs[0] {
		row[h] = recs[1][i]
	}
	for field, want := range map[string]string{"attempted_action": `'=HYPERLINK("http://evil.example","x")`, "expected_outcome": "'+1",
		"actual_outcome": "'-2, with \"quotes\"\nand a line", "error_seen": "'@SUM(A1)", "severity": "high", "status": "new"} {
		if row[field] != want {
			t.Errorf("%s = %q, want %q", field, row[field], want)
		}
	}
}

func TestFeedback_AgentSubmitsWithTheMCPTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	s := e.mustMCP(e.token("owner@example.com", auth.TokenAgent), "claude-code", nil)
	res, text := callTool(t, s, "submit_feedback", feedbackBody(map[string]any{"tool_called": "records.teleport", "severity": "high"}))
	data := structured(t, res)
	if res.IsError || data["status"] != "new" || data["tool_known"] != false {
		t.Fatalf("submit_feedback: %s %v", text, data)
	}
	var kind, tool, sev string
	if err := e.pool.QueryRow(context.Background(), "SELECT submitted_by_kind, tool_called, severity FROM feedback WHERE id = $1", data["feedback_id"]).Scan(&kind, &tool, &sev); err != nil ||
		kind != "agent" || tool != "records.teleport" || sev != "high" {
		t.Errorf("stored: %s %s %s %v", kind, tool, sev, err)
	}
	res, text = callTool(t, s, "submit_feedback", feedbackBody(map[string]any{"rationale": "short"}))
	if !res.IsError || !strings.Contains(text, "rationale") {
		t.Errorf("a short rationale: %v %s", res.IsError, text)
	}
}

func TestFeedback_PageEscapesAnAgentsToolNameInItsLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	agent := e.token("admin@example.com", auth.TokenAgent)
	e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"tool_called": `x&status=done"><b>`}))
	_, page := admin.get("/admin/feedback")
	if !strings.Contains(page, `href="/admin/feedback?tool=x%26status%3Ddone%22%3E%3Cb%3E"`) || strings.Contains(page, `"><b>`) {
		t.Errorf("the tool's link is not escaped:\n%s", page)
	}
}

func TestFeedback_AnItemLinksToItsProposalsPacketOrDecision(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	admin := e.user("admin@example.com", auth.RoleAdmin)
	agent := e.token("admin@example.com", auth.TokenAgent)
	user := e.token("admin@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "c"})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	_, deferred := e.api("POST", calls, agent, map[string]any{"tool": "t.send", "idempotency_key": "send-feedback-000001",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "a deferred call"})
	_, pending := e.api("POST", calls, agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "a pending call"})
	e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"proposal_id": deferred["proposal_id"], "severity": "high"}))
	e.api("POST", "/api/v1/feedback", agent, feedbackBody(map[string]any{"proposal_id": pending["proposal_id"], "severity": "low"}))
	_, list := e.api("GET", "/admin/feedback?severity=high", user, nil)
	if it := list["items"].([]any)[0].(map[string]any); it["approval_id"] != deferred["approval_id"] {
		t.Errorf("the item does not name the packet: %v", it)
	}
	_, page := admin.get("/admin/feedback")
	for _, want := range []string{`href="/admin/approvals/` + deferred["approval_id"].(string) + `"`, `href="/admin/receipts?proposal=` + pending["proposal_id"].(string) + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
