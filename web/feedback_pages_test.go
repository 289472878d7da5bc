package web_test

import (
	"encoding/base64"
	"encoding/csv"
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// seedFeedbackItems writes n feedback items submitted by email's user,
// three at a time with the same creation time (step apart, newest now),
// so that pages must order ties by id: tools records.search,
// records.put and email.send in turn, severities low, med and high in
// turn by three, one in four still new.
func seedFeedbackItems(t *testing.T, e *env, email string, n int, step time.Duration) {
	t.Helper()
	if _, err := e.pool.Exec(t.Context(), `
		INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_kind, attempted_action, expected_outcome, actual_outcome,
		                      tool_called, severity, rationale, status, created_at)
		SELECT $1, u.id, 'agent', 'tried ' || i, 'it to work', 'it did not',
		       (ARRAY['records.search', 'records.put', 'email.send'])[1 + i % 3], (ARRAY['low', 'med', 'high'])[1 + (i / 3) % 3],
		       'the agent got stuck here', CASE WHEN i % 4 = 0 THEN 'new' ELSE 'triaged' END,
		       date_trunc('second', now()) - (i / 3) * $4::interval
		FROM users u, generate_series(0, $3::int - 1) i
		WHERE u.email = $2`, e.ws, email, n, step); err != nil {
		t.Fatal(err)
	}
}

// feedbackIDs are the ids of the workspace's items matching where, in the
// list's order (newest first, then by id).
func feedbackIDs(t *testing.T, e *env, where string, args ...any) []string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), "SELECT id::text FROM feedback WHERE "+where+" ORDER BY created_at DESC, id DESC", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// feedbackJSONPage asks the JSON triage list for one page.
func feedbackJSONPage(t *testing.T, e *env, token, query string) (int, []string, map[string]any) {
	t.Helper()
	status, body := adminJSON(t, e, "GET", "/admin/feedback?"+query, token, nil)
	var ids []string
	items, _ := body["items"].([]any)
	for _, it := range items {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	return status, ids, body
}

// readAllFeedback follows next_cursor from the first page of query to the
// last, and returns every id in the order read and each page's size.
func readAllFeedback(t *testing.T, e *env, token, query string) ([]string, []int) {
	t.Helper()
	var all []string
	var sizes []int
	cursor := ""
	for range 100 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		status, ids, body := feedbackJSONPage(t, e, token, q)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %v", q, status, body)
		}
		all, sizes = append(all, ids...), append(sizes, len(ids))
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return all, sizes
		}
		cursor = next
	}
	t.Fatalf("%s: more than 100 pages", query)
	return nil, nil
}

var pageNextLink = regexp.MustCompile(`href="([^"]+)" rel="next" data-testid="page-next"`)

func TestFeedbackPages_EveryItemOnceNewestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	user := e.token("boss@example.com", auth.TokenUser)
	seedFeedbackItems(t, e, "boss@example.com", 130, time.Hour)
	dayAndAHalfHourAgo := time.Now().Add(-24*time.Hour - 30*time.Minute)
	for _, c := range []struct {
		name, query, where string
		args               []any
		sizes              []int
	}{
		{"every item", "limit=50", "true", nil, []int{50, 50, 30}},
		{"the default limit", "", "true", nil, []int{50, 50, 30}},
		{"by status", "status=new&limit=7", "status = 'new'", nil, nil},
		{"by severity", "severity=high&limit=20", "severity = 'high'", nil, nil},
		{"by tool, status and severity", "tool=records.put&status=triaged&severity=med&limit=3",
			"tool_called = 'records.put' AND status = 'triaged' AND severity = 'med'", nil, nil},
		// Between two hours' items, so that the query's second and the
		// check's microsecond agree.
		{"since", "since=" + url.QueryEscape(dayAndAHalfHourAgo.UTC().Format(time.RFC3339)) + "&limit=10",
			"created_at >= $1", []any{dayAndAHalfHourAgo}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, sizes := readAllFeedback(t, e, user, c.query)
			want := feedbackIDs(t, e, c.where, c.args...)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Fatalf("read %d items %v, want %d in order", len(got), sizes, len(want))
			}
			if c.sizes != nil && !slices.Equal(sizes, c.sizes) {
				t.Errorf("pages of %v, want %v", sizes, c.sizes)
			}
		})
	}
	// The page: "Older" leads on, and back to the newest.
	want := feedbackIDs(t, e, "true")
	path, seen := "/admin/feedback?limit=50", []string{}
	itemID := regexp.MustCompile(`<li id="feedback-([0-9a-f-]{36})"`)
	for page := 1; ; page++ {
		resp, body := boss.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d", page, resp.StatusCode)
		}
		for _, m := range itemID.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		if hasFirst := strings.Contains(body, `data-testid="page-first"`); hasFirst != (page > 1) {
			t.Errorf("page %d: a link to the newest items: %v", page, hasFirst)
		}
		m := pageNextLink.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = html.UnescapeString(m[1])
	}
	if !slices.Equal(seen, want) {
		t.Errorf("the pages showed %d items, want the %d in order", len(seen), len(want))
	}
}

func TestFeedbackPages_APageStopsAtItsBudgetAndReadsOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	user := e.token("boss@example.com", auth.TokenUser)
	// 1,200 new items, then (older) the one new item of high severity.
	seedFeedbackItems(t, e, "boss@example.com", 4, time.Hour)
	if _, err := e.pool.Exec(t.Context(), `
		UPDATE feedback SET status = 'new', severity = CASE WHEN created_at = (SELECT min(created_at) FROM feedback) THEN 'high' ELSE 'low' END`); err != nil {
		t.Fatal(err)
	}
	target := feedbackIDs(t, e, "severity = 'high'")
	if len(target) != 1 {
		t.Fatalf("%d targets", len(target))
	}
	if _, err := e.pool.Exec(t.Context(), `
		INSERT INTO feedback (workspace_id, submitted_by_user_id, submitted_by_kind, attempted_action, expected_outcome, actual_outcome,
		                      severity, rationale, status, created_at)
		SELECT workspace_id, submitted_by_user_id, 'agent', 'a newer report', 'x', 'y', 'low', 'the agent got stuck here', 'new',
		       now() - i * interval '1 second'
		FROM feedback, generate_series(1, 1200) i WHERE id = $1`, target[0]); err != nil {
		t.Fatal(err)
	}
	status, ids, body := feedbackJSONPage(t, e, user, "status=new&severity=high")
	next, _ := body["next_cursor"].(string)
	if status != http.StatusOK || len(ids) != 0 || body["partial"] != true || next == "" {
		t.Fatalf("first page: %d %v %v", status, ids, body)
	}
	status, ids, body = feedbackJSONPage(t, e, user, "status=new&severity=high&cursor="+url.QueryEscape(next))
	if status != http.StatusOK || !slices.Equal(ids, target) || body["next_cursor"] != nil || body["partial"] != nil {
		t.Fatalf("second page: %d %v %v", status, ids, body)
	}
	_, page := boss.get("/admin/feedback?status=new&severity=high")
	if !strings.Contains(page, `data-testid="page-note"`) || !strings.Contains(page, "read 1000 items and none match") ||
		!strings.Contains(page, `data-testid="page-next"`) {
		t.Fatalf("partial page:\n%s", page)
	}
}

func TestFeedbackPages_BadCursorLimitOrSinceIs422NamingIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	e.user("boss2@example.com", auth.RoleApprover)
	e.user("member@example.com", auth.RoleMember)
	user := e.token("boss@example.com", auth.TokenUser)
	other := e.token("boss2@example.com", auth.TokenUser)
	member := e.token("member@example.com", auth.TokenUser)
	seedFeedbackItems(t, e, "boss@example.com", 60, time.Hour)
	_, _, first := feedbackJSONPage(t, e, user, "status=triaged&limit=10")
	cursor := first["next_cursor"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("the cursor is not base64url: %q", cursor)
	}
	raw[len(raw)/2] ^= 1 // an item further on
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	since := url.QueryEscape(time.Now().AddDate(0, 0, -30).Format("2006-01-02"))
	for _, c := range []struct {
		name, token, query, field string
	}{
		{"altered", user, "status=triaged&limit=10&cursor=" + tampered, "cursor"},
		{"cut short", user, "status=triaged&limit=10&cursor=" + cursor[:20], "cursor"},
		{"not base64", user, "status=triaged&limit=10&cursor=" + url.QueryEscape(strings.Repeat("!", len(cursor))), "cursor"},
		{"another filter", user, "status=new&limit=10&cursor=" + cursor, "cursor"},
		{"another since", user, "status=triaged&since=" + since + "&limit=10&cursor=" + cursor, "cursor"},
		{"another user", other, "status=triaged&limit=10&cursor=" + cursor, "cursor"},
		{"limit 0", user, "limit=0", "limit"},
		{"limit 201", user, "limit=201", "limit"},
		{"limit not a number", user, "limit=ten", "limit"},
		{"since unreadable", user, "since=yesterday", "since"},
	} {
		status, ids, body := feedbackJSONPage(t, e, c.token, c.query)
		errs, _ := body["errors"].([]any)
		if status != http.StatusUnprocessableEntity || len(ids) != 0 || len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
			t.Errorf("%s: %d %v, want 422 naming %s", c.name, status, body, c.field)
		}
	}
	// The same cursor, asked for as it was given, still reads on.
	if status, ids, _ := feedbackJSONPage(t, e, user, "status=triaged&limit=10&cursor="+cursor); status != http.StatusOK || len(ids) != 10 {
		t.Errorf("the cursor itself: %d, %d items", status, len(ids))
	}
	// The caller's rights come first: a member is refused, whatever the page.
	for _, q := range []string{"limit=0&cursor=x", "since=yesterday"} {
		if status, _, body := feedbackJSONPage(t, e, member, q); status != http.StatusForbidden {
			t.Errorf("a member with %s: %d %v, want 403", q, status, body)
		}
	}
	// The page: 422, the message next to the filters, the first page.
	resp, body := boss.get("/admin/feedback?status=triaged&limit=10&cursor=" + tampered)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="filter-error"`) ||
		!strings.Contains(body, "The page cursor cannot be read") || strings.Count(body, `data-testid="feedback-item"`) != 45 ||
		strings.Contains(body, `data-testid="page-first"`) {
		t.Fatalf("altered cursor on the page: %d\n%s", resp.StatusCode, body)
	}
	for _, q := range []string{"limit=0", "limit=201"} {
		resp, body = boss.get("/admin/feedback?" + q)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "The limit must be a number from 1 to 200.") ||
			strings.Count(body, `data-testid="feedback-item"`) != 50 {
			t.Errorf("%s on the page: %d\n%s", q, resp.StatusCode, body)
		}
	}
	resp, body = boss.get("/admin/feedback?since=yesterday")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "since must be a date") {
		t.Errorf("an unreadable since on the page: %d\n%s", resp.StatusCode, body)
	}
	// The CSV export: a bad since is 422, a member 403.
	if resp, _ := boss.get("/admin/feedback.csv?since=yesterday"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("CSV with an unreadable since: %d", resp.StatusCode)
	}
}

func TestFeedbackCounts_CorrectPastTheOld1000Cap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	user := e.token("boss@example.com", auth.TokenUser)
	seedFeedbackItems(t, e, "boss@example.com", 1500, time.Hour)
	status, ids, body := feedbackJSONPage(t, e, user, "")
	if status != http.StatusOK || len(ids) != 50 || body["next_cursor"] == nil || body["counts_since"] != nil {
		t.Fatalf("%d, %d items, %v", status, len(ids), body["next_cursor"])
	}
	byTool := map[string]float64{}
	for _, g := range body["by_tool"].([]any) {
		g := g.(map[string]any)
		byTool[g["tool_called"].(string)] = g["count"].(float64)
	}
	if want := map[string]float64{"records.search": 500, "records.put": 500, "email.send": 500}; !maps.Equal(byTool, want) {
		t.Errorf("by tool %v, want %v", byTool, want)
	}
	// Per week as PostgreSQL counts them, every week of the 90 days shown.
	rows, err := e.pool.Query(t.Context(), `SELECT to_char(date_trunc('week', created_at, 'UTC'), 'YYYY-MM-DD'), count(*) FROM feedback GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for rows.Next() {
		var w string
		var n float64
		rows.Scan(&w, &n)
		want[w] = n
	}
	weekly := body["weekly"].([]any)
	got, total := map[string]float64{}, 0.0
	for _, w := range weekly {
		w := w.(map[string]any)
		if n := w["count"].(float64); n > 0 {
			got[w["week_start"].(string)] = n
			total += n
		}
	}
	if total != 1500 || !maps.Equal(got, want) || len(weekly) < 13 {
		t.Errorf("%d weeks adding up to %v: %v, want %v", len(weekly), total, got, want)
	}
	// The page shows the same counts.
	_, page := boss.get("/admin/feedback")
	if !regexp.MustCompile(`>records\.put</a>\s*</td><td>500</td>`).MatchString(page) || !strings.Contains(page, "1500 feedback items over") {
		t.Errorf("the page's counts:\n%s", page)
	}
	// Filtered: the counts follow the filter.
	_, _, body = feedbackJSONPage(t, e, user, "status=new&tool=email.send")
	g := body["by_tool"].([]any)
	if n := len(feedbackIDs(t, e, "status = 'new' AND tool_called = 'email.send'")); len(g) != 1 || g[0].(map[string]any)["count"] != float64(n) {
		t.Errorf("filtered counts %v, want %d", g, n)
	}
}

func TestFeedbackCounts_StopAtTheirBudgetAndSaySo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	boss := e.user("boss@example.com", auth.RoleApprover)
	user := e.token("boss@example.com", auth.TokenUser)
	seedFeedbackItems(t, e, "boss@example.com", 5200, 10*time.Minute)
	_, _, body := feedbackJSONPage(t, e, user, "")
	var oldest time.Time
	if err := e.pool.QueryRow(t.Context(), `SELECT created_at FROM feedback ORDER BY created_at DESC, id DESC OFFSET 4999 LIMIT 1`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}
	since, _ := body["counts_since"].(string)
	if at, err := time.Parse(time.RFC3339, since); err != nil || !at.Equal(oldest) {
		t.Errorf("counts_since %q, want %s", since, oldest)
	}
	total := 0.0
	for _, g := range body["by_tool"].([]any) {
		total += g.(map[string]any)["count"].(float64)
	}
	if total != 5000 {
		t.Errorf("the counts add up to %v, want the 5000 read", total)
	}
	_, page := boss.get("/admin/feedback")
	if !strings.Contains(page, `data-testid="counts-note"`) || !strings.Contains(page, "The counts stop at the newest 5000 items") {
		t.Errorf("the page does not say where its counts stop")
	}
}

func TestFeedbackCSV_StreamsEveryMatchingItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	seedFeedbackItems(t, e, "admin@example.com", 1300, time.Hour)
	for _, c := range []struct{ query, where string }{
		{"", "true"},
		{"?status=new", "status = 'new'"},
		{"?tool=records.put&severity=low", "tool_called = 'records.put' AND severity = 'low'"},
	} {
		resp, body := admin.get("/admin/feedback.csv" + c.query)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", c.query, resp.StatusCode)
		}
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs[1:] {
			got = append(got, r[0])
		}
		if want := feedbackIDs(t, e, c.where); recs[0][0] != "id" || !slices.Equal(got, want) {
			t.Errorf("%s: %d rows, want the %d items in order", c.query, len(got), len(want))
		}
	}
}
