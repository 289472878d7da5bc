package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// fatigueCalls proposes calls in one conversation and decides them over
// the real API.
type fatigueCalls struct {
	e           *env
	agent, user string
	calls       string // the conversation's tool-calls URL
	n           int
}

// propose has the agent propose tool with args; the call waits for the
// owner's confirm card.
func (f *fatigueCalls) propose(tool string, args map[string]any) string {
	f.e.t.Helper()
	f.n++
	body := map[string]any{"tool": tool, "arguments": args, "rationale": "a call a person decides"}
	if tool == "notes.append" {
		body["idempotency_key"] = fmt.Sprintf("fatigue-note-%08d", f.n)
	}
	resp, p := f.e.api("POST", f.calls, f.agent, body)
	if resp.StatusCode != http.StatusAccepted {
		f.e.t.Fatalf("propose %s: %d %v", tool, resp.StatusCode, p)
	}
	return p["proposal_id"].(string)
}

// aged makes the call as if proposed ago before now: its proposal's
// created_at is moved back directly in the test database, so that a
// decision taken now took that long (the decision time is from created_at
// to the person's claim or rejection), without the test waiting minutes.
func (f *fatigueCalls) aged(id string, ago time.Duration) string {
	f.e.t.Helper()
	if _, err := f.e.pool.Exec(context.Background(), `UPDATE proposals SET created_at = created_at - make_interval(secs => $2) WHERE id = $1`,
		id, ago.Seconds()); err != nil {
		f.e.t.Fatal(err)
	}
	return id
}

func (f *fatigueCalls) apply(id string, edited map[string]any) {
	f.e.t.Helper()
	var body any
	if edited != nil {
		body = map[string]any{"arguments": edited}
	}
	if resp, p := f.e.api("POST", "/api/v1/proposals/"+id+"/apply", f.user, body); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
		f.e.t.Fatalf("apply %s: %d %v", id, resp.StatusCode, p)
	}
}

func (f *fatigueCalls) reject(id string) {
	f.e.t.Helper()
	if resp, p := f.e.api("POST", "/api/v1/proposals/"+id+"/reject", f.user, map[string]any{"reason": "not this one"}); resp.StatusCode != http.StatusOK {
		f.e.t.Fatalf("reject %s: %d %v", id, resp.StatusCode, p)
	}
}

// fatigueRow is one class and tool's row of the /trust page's table.
func fatigueRow(t *testing.T, page, class, tool string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<tr data-testid="fatigue-row" data-class="` + regexp.QuoteMeta(class) + `" data-tool="` + regexp.QuoteMeta(tool) + `">(.*?)</tr>`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("/trust has no approval-fatigue row for %s / %s", class, tool)
	}
	return m[1]
}

// fatigueAPI reads GET /api/v1/action-classes with query, checked
// against openapi.yaml like every API answer in these tests.
func fatigueAPI(t *testing.T, e *env, token, query string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/api/v1/action-classes?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(readBody(t, resp))
	checkAgainstSpec(t, req, nil, resp, body)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// fatigueTools are the API's rows by tool.
func fatigueTools(t *testing.T, body map[string]any) map[string]map[string]any {
	t.Helper()
	f, ok := body["approval_fatigue"].(map[string]any)
	if !ok {
		t.Fatalf("no approval_fatigue: %v", body)
	}
	out := map[string]map[string]any{}
	for _, x := range f["tools"].([]any) {
		row := x.(map[string]any)
		out[row["action_class"].(string)+" "+row["tool"].(string)] = row
	}
	return out
}

// Calls a person decided on confirm cards are counted per class and tool
// over the last 30 days: approved as proposed within 5 minutes, the
// median time to decision, rejections, and the suggestion the rule gives
// (re-tier or grant when fast approvals are more than half of at least 10
// decisions; tighten when rejections are 30 % or more, even if the rest
// were fast). Edited and slow approvals are not fast; calls run
// automatically or under a grant, and decisions older than the period,
// are not counted. The page and the API say the same before and after
// the roll-up folds the calls.
func TestApprovalFatigue_CountsPeoplesDecisionsAndSuggests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("ana@example.com", auth.RoleAdmin)
	user := e.token("ana@example.com", auth.TokenUser)
	agent := e.token("ana@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "fatigue"})
	convID := conv["id"].(string)
	f := &fatigueCalls{e: e, agent: agent, user: user, calls: "/api/v1/conversations/" + convID + "/tool-calls"}
	put := func(v string) map[string]any {
		return map[string]any{"collection": "c", "key": "k", "value": map[string]any{"v": v}}
	}
	note := map[string]any{"collection": "c", "key": "k", "text": "called"}

	// records.put: 7 approved as proposed after 2 minutes, 1 edited after 2
	// minutes, 3 approved after 10 minutes, 1 rejected after 1 minute: 12
	// decisions, 7 fast (58 %), 1 rejected; median 2 minutes.
	for i := range 7 {
		f.apply(f.aged(f.propose("records.put", put(fmt.Sprint(i))), 2*time.Minute), nil)
	}
	f.apply(f.aged(f.propose("records.put", put("x")), 2*time.Minute), put("edited"))
	for i := range 3 {
		f.apply(f.aged(f.propose("records.put", put(fmt.Sprint("slow", i))), 10*time.Minute), nil)
	}
	f.reject(f.aged(f.propose("records.put", put("no")), time.Minute))
	// Outside the period: proposed 40 days ago and rejected now.
	f.reject(f.aged(f.propose("records.put", put("old")), 40*24*time.Hour))
	// notes.append: 6 approved as proposed after a minute and 4 rejected:
	// 60 % fast, but 40 % rejected, so tighten.
	for range 6 {
		f.apply(f.aged(f.propose("notes.append", note), time.Minute), nil)
	}
	for range 4 {
		f.reject(f.propose("notes.append", note))
	}
	// Nobody's decision: two calls under a grant, one in an auto-mode
	// conversation, and one still waiting.
	if resp, g := e.api("POST", "/api/v1/grants", user, map[string]any{"tool": "records.put", "conversation_id": convID,
		"duration_minutes": 15, "max_calls": 2}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("grant: %d %v", resp.StatusCode, g)
	}
	for i := range 2 {
		if resp, p := e.api("POST", f.calls, agent, map[string]any{"tool": "records.put", "arguments": put(fmt.Sprint("granted", i)),
			"rationale": "a call under the grant"}); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
			t.Fatalf("a call under the grant: %d %v", resp.StatusCode, p)
		}
	}
	_, auto := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "auto"})
	if resp, c := e.api("PATCH", "/api/v1/conversations/"+auto["id"].(string), user, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("auto mode: %d %v", resp.StatusCode, c)
	}
	if resp, p := e.api("POST", "/api/v1/conversations/"+auto["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": put("auto"), "rationale": "an automatic call"}); resp.StatusCode != http.StatusOK || p["status"] != "applied" {
		t.Fatalf("an automatic call: %d %v", resp.StatusCode, p)
	}
	f.propose("records.put", put("waiting"))

	check := func(when string) {
		t.Helper()
		_, page := admin.get("/trust")
		for _, want := range []string{"Over the last 30 days: UTC days " + time.Now().UTC().AddDate(0, 0, -29).Format(time.DateOnly) + " to " + time.Now().UTC().Format(time.DateOnly),
			"from 10 decisions: rejected in 30 % or more of them, tighten; otherwise approved as proposed (no edit) within 5 min in more than 50 % of them, re-tier"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: /trust lacks %q", when, want)
			}
		}
		put := fatigueRow(t, page, "tool.call.local", "records.put")
		for _, want := range []string{">12 (11 approved, 1 rejected)<", ">58 % (7 of 12)<", ">≈ 2 min<", ">8 % (1 of 12)<", `data-kind="retier_or_grant"`,
			"Re-tier the tool", "or grant its calls", `href="/grants"`, `href="/tools#tool-records.put"`, `href="#thresholds"`} {
			if !strings.Contains(put, want) {
				t.Errorf("%s: the records.put row lacks %q:\n%s", when, want, put)
			}
		}
		notes := fatigueRow(t, page, "tool.call.local", "notes.append")
		for _, want := range []string{">10 (6 approved, 4 rejected)<", ">60 % (6 of 10)<", ">40 % (4 of 10)<", `data-kind="tighten"`, "Tighten:"} {
			if !strings.Contains(notes, want) {
				t.Errorf("%s: the notes.append row lacks %q:\n%s", when, want, notes)
			}
		}

		status, body := fatigueAPI(t, e, user, "approval_fatigue=true")
		if status != http.StatusOK || body["action_classes"] == nil {
			t.Fatalf("%s: the API: %d %v", when, status, body)
		}
		rows := fatigueTools(t, body)
		if len(rows) != 2 {
			t.Errorf("%s: the API has %d rows, want 2: %v", when, len(rows), rows)
		}
		p := rows["tool.call.local records.put"]
		if p["decisions"] != float64(12) || p["approvals"] != float64(11) || p["fast_approvals"] != float64(7) || p["rejections"] != float64(1) ||
			p["suggestion"] != "retier_or_grant" || p["grantable"] != true || !near(p["fast_approval_share"].(float64), 7.0/12) {
			t.Errorf("%s: records.put over the API: %v", when, p)
		}
		// The median is read from the histogram: within 2 minutes' bucket.
		if m := p["median_decision_seconds"].(float64); m < 107 || m > 128 {
			t.Errorf("%s: records.put's median %v s, want 120 s within its bucket [107.6, 128)", when, m)
		}
		n := rows["tool.call.local notes.append"]
		if n["decisions"] != float64(10) || n["fast_approvals"] != float64(6) || n["rejections"] != float64(4) || n["suggestion"] != "tighten" ||
			!near(n["rejected_share"].(float64), 0.4) {
			t.Errorf("%s: notes.append over the API: %v", when, n)
		}
		fa := body["approval_fatigue"].(map[string]any)
		if fa["days"] != float64(30) || fa["until"] != time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly) {
			t.Errorf("%s: the API's period: %v", when, fa)
		}
	}
	check("before folding")
	e.waitFolded()
	check("folded")

	// Without the parameter the list is as it was (and as openapi.yaml
	// says); a value that is not a boolean is 422 naming it.
	if resp, body := e.api("GET", "/api/v1/action-classes", user, nil); resp.StatusCode != http.StatusOK || body["approval_fatigue"] != nil {
		t.Errorf("without the parameter: %d %v", resp.StatusCode, body)
	}
	status, body := fatigueAPI(t, e, user, "approval_fatigue=maybe")
	if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(body), "approval_fatigue") {
		t.Errorf("approval_fatigue=maybe: %d %v", status, body)
	}
}

// Below 10 decisions the numbers are shown but suggest nothing, and a
// workspace without decisions says so.
func TestApprovalFatigue_FewDecisionsSuggestNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	member := e.user("bo@example.com", auth.RoleMember)
	user := e.token("bo@example.com", auth.TokenUser)
	agent := e.token("bo@example.com", auth.TokenAgent)
	if _, page := member.get("/trust"); !strings.Contains(page, `data-testid="fatigue-empty"`) {
		t.Fatalf("/trust without decisions lacks the empty note")
	}
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	f := &fatigueCalls{e: e, agent: agent, user: user, calls: "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"}
	for i := range 9 {
		f.apply(f.propose("records.put", map[string]any{"collection": "c", "key": "k", "value": map[string]any{"i": i}}), nil)
	}
	_, page := member.get("/trust")
	row := fatigueRow(t, page, "tool.call.local", "records.put")
	for _, want := range []string{">9 (9 approved, 0 rejected)<", ">100 % (9 of 9)<", ">0 % (0 of 9)<", ">&lt; 1 s<"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "data-kind=\"retier_or_grant\"") || strings.Contains(row, "Re-tier") {
		t.Errorf("9 decisions gave a suggestion:\n%s", row)
	}
}
