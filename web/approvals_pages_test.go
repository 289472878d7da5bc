package web_test

import (
	"encoding/base64"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// clonePackets copies the call and the packet of approvalID n times:
// pending packets of the same call (tool and risk), created a millisecond
// apart, for tests that need more packets than it is worth proposing one
// by one.
func clonePackets(t *testing.T, e *env, approvalID string, n int) {
	t.Helper()
	if _, err := e.pool.Exec(t.Context(), `
		WITH src AS (
			SELECT p AS call, a AS packet FROM approvals a JOIN proposals p ON p.id = a.proposal_id WHERE a.id = $1
		), calls AS (
			INSERT INTO proposals
			SELECT r.* FROM src, generate_series(1, $2) i,
			     LATERAL jsonb_populate_record(src.call, jsonb_build_object('id', gen_random_uuid(),
			             'created_at', (src.call).created_at + i * interval '1 millisecond')) r
			RETURNING id, created_at
		)
		INSERT INTO approvals (workspace_id, proposal_id, summary, approver_role, requires_witness, created_at, expires_at)
		SELECT (src.packet).workspace_id, calls.id, (src.packet).summary, (src.packet).approver_role, (src.packet).requires_witness,
		       calls.created_at, (src.packet).expires_at + (calls.created_at - (src.packet).created_at)
		FROM src, calls`, approvalID, n); err != nil {
		t.Fatal(err)
	}
}

// tiedExpiries gives the pending packets ten at a time the same expiry, so
// that pages must order ties by id.
func tiedExpiries(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.pool.Exec(t.Context(), `
		UPDATE approvals a SET expires_at = now() + interval '1 hour' + (s.n / 10) * interval '1 minute'
		FROM (SELECT id, row_number() OVER (ORDER BY created_at) AS n FROM approvals WHERE status = 'pending') s
		WHERE a.id = s.id`); err != nil {
		t.Fatal(err)
	}
}

// packetIDs are the ids of the workspace's packets in a list's order.
func packetIDs(t *testing.T, e *env, where, order string) []string {
	t.Helper()
	rows, err := e.pool.Query(t.Context(), "SELECT id::text FROM approvals WHERE "+where+" ORDER BY "+order)
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

// queuePage asks the JSON queue for one page.
func queuePage(t *testing.T, e *env, token, query string) (int, []string, map[string]any) {
	t.Helper()
	status, body := adminJSON(t, e, "GET", "/admin/approvals?"+query, token, nil)
	var ids []string
	list, _ := body["approvals"].([]any)
	for _, a := range list {
		ids = append(ids, a.(map[string]any)["approval_id"].(string))
	}
	return status, ids, body
}

// walkQueue reads a list through the JSON queue, page after page, and
// returns the ids in the order read and each page's size.
func walkQueue(t *testing.T, e *env, token string, filter url.Values) (ids []string, sizes []int) {
	t.Helper()
	q := url.Values{}
	for k, v := range filter {
		q[k] = v
	}
	for range 100 {
		status, page, body := queuePage(t, e, token, q.Encode())
		if status != http.StatusOK {
			t.Fatalf("page %d of %v: %d %v", len(sizes)+1, filter, status, body)
		}
		ids, sizes = append(ids, page...), append(sizes, len(page))
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return ids, sizes
		}
		q.Set("cursor", next)
	}
	t.Fatal("the queue never ends")
	return nil, nil
}

func TestInboxPages_EachPacketOnceInTheListOrder(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 129)
	tiedExpiries(t, f.e)

	// Pending: soonest expiry first, ties by id; 50 a page by default.
	ids, sizes := walkQueue(t, f.e, f.approver, url.Values{"status": {"pending"}})
	if want := packetIDs(t, f.e, "status = 'pending'", "expires_at, id"); !slices.Equal(ids, want) || !slices.Equal(sizes, []int{50, 50, 30}) {
		t.Fatalf("pending pages %v: %d packets, want the 130 in expiry order\ngot  %v\nwant %v", sizes, len(ids), ids, want)
	}
	// The other statuses and any status: newest first, ties by id.
	if _, err := f.e.pool.Exec(t.Context(), `UPDATE approvals SET status = 'approved', resolved_at = now()
		WHERE id IN (SELECT id FROM approvals ORDER BY id LIMIT 70)`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.pool.Exec(t.Context(), `UPDATE approvals SET created_at = date_trunc('second', created_at)`); err != nil {
		t.Fatal(err) // ties
	}
	ids, sizes = walkQueue(t, f.e, f.approver, url.Values{"status": {"approved"}, "limit": {"25"}})
	if want := packetIDs(t, f.e, "status = 'approved'", "created_at DESC, id DESC"); !slices.Equal(ids, want) || !slices.Equal(sizes, []int{25, 25, 20}) {
		t.Fatalf("approved pages %v: %d packets, want the 70 newest first", sizes, len(ids))
	}
	ids, _ = walkQueue(t, f.e, f.approver, url.Values{"status": {""}, "limit": {"200"}})
	if want := packetIDs(t, f.e, "true", "created_at DESC, id DESC"); !slices.Equal(ids, want) {
		t.Fatalf("any status: %d packets, want the 130 newest first", len(ids))
	}
	ids, sizes = walkQueue(t, f.e, f.approver, url.Values{"status": {"pending"}, "limit": {"1"}})
	if len(ids) != 60 || len(sizes) != 60 {
		t.Fatalf("a page of one: %d packets in %d pages, want 60 in 60", len(ids), len(sizes))
	}
}

func TestInboxPages_NextLinksWalkTheQueueWithoutScript(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 129)
	tiedExpiries(t, f.e)
	rowID := regexp.MustCompile(`data-testid="packet" data-id="([^"]+)"`)
	nextLink := regexp.MustCompile(`<a href="([^"]+)"[^>]*data-testid="page-next">Next`)
	var ids []string
	path := "/admin/approvals"
	for page := 1; ; page++ {
		resp, body := f.boss.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d (%s): %d", page, path, resp.StatusCode)
		}
		for _, m := range rowID.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		if page > 1 && !strings.Contains(body, `data-testid="page-first"`) {
			t.Fatalf("page %d has no link to the first page", page)
		}
		if page == 2 {
			// A packet opened from a later page keeps the page.
			if !regexp.MustCompile(`data-testid="packet-link"`).MatchString(body) || !strings.Contains(body, `/admin/approvals/`+rowID.FindStringSubmatch(body)[1]+`?cursor=`) {
				t.Fatalf("the packets of page 2 do not keep the page:\n%s", body)
			}
		}
		m := nextLink.FindStringSubmatch(body)
		if m == nil {
			if page != 3 {
				t.Fatalf("the queue ends on page %d", page)
			}
			break
		}
		path = html.UnescapeString(m[1])
	}
	if want := packetIDs(t, f.e, "status = 'pending'", "expires_at, id"); !slices.Equal(ids, want) {
		t.Fatalf("the pages show %d packets, want the 130 in expiry order", len(ids))
	}
	// A resolved list pages "Older".
	if _, err := f.e.pool.Exec(t.Context(), `UPDATE approvals SET status = 'rejected', resolved_at = now(), rejection_reason = 'No.'`); err != nil {
		t.Fatal(err)
	}
	if _, body := f.boss.get("/admin/approvals?status=rejected"); !regexp.MustCompile(`data-testid="page-next">Older`).MatchString(body) ||
		strings.Count(body, `data-testid="packet"`) != 50 {
		t.Fatalf("rejected, first page:\n%s", body)
	}
}

func TestInboxPages_FiltersHoldAcrossPages(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 59)
	medium := []string{f.file(t, "one"), f.file(t, "two"), f.file(t, "three")}
	ids, sizes := walkQueue(t, f.e, f.approver, url.Values{"risk": {"medium"}, "limit": {"2"}})
	slices.Sort(ids)
	slices.Sort(medium)
	if !slices.Equal(ids, medium) || !slices.Equal(sizes, []int{2, 1}) {
		t.Fatalf("medium risk: %v in pages %v, want the three filings", ids, sizes)
	}
	ids, sizes = walkQueue(t, f.e, f.approver, url.Values{"risk": {"high"}, "tool": {"t.send"}, "limit": {"25"}})
	if len(ids) != 60 || !slices.Equal(sizes, []int{25, 25, 10}) {
		t.Fatalf("high risk sends: %d in pages %v, want 60 in 25, 25, 10", len(ids), sizes)
	}
	// The page's links keep the filter.
	_, body := f.boss.get("/admin/approvals?risk=high&limit=25")
	m := regexp.MustCompile(`<a href="([^"]+)"[^>]*data-testid="page-next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no next page:\n%s", body)
	}
	next, _ := url.Parse(html.UnescapeString(m[1]))
	if q := next.Query(); q.Get("risk") != "high" || q.Get("status") != "pending" || q.Get("limit") != "25" || q.Get("cursor") == "" {
		t.Fatalf("the next page's link drops the filter: %s", next)
	}
}

// A page reads at most 500 packets of its list, however narrow the
// filter: a filter that matches one packet in 600 answers an empty,
// partial first page with a cursor, and the packet on the next.
func TestInboxPages_NarrowFilterReadsABoundedPage(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 599)
	order := packetIDs(t, f.e, "status = 'pending'", "expires_at, id")
	target := order[549]
	if _, err := f.e.pool.Exec(t.Context(), `UPDATE proposals SET action_class = 'rare.class'
		WHERE id = (SELECT proposal_id FROM approvals WHERE id = $1)`, target); err != nil {
		t.Fatal(err)
	}
	status, ids, body := queuePage(t, f.e, f.approver, "action_class=rare.class")
	next, _ := body["next_cursor"].(string)
	if status != http.StatusOK || len(ids) != 0 || body["partial"] != true || next == "" {
		t.Fatalf("first page: %d %v %v", status, ids, body)
	}
	status, ids, body = queuePage(t, f.e, f.approver, "action_class=rare.class&cursor="+next)
	if status != http.StatusOK || !slices.Equal(ids, []string{target}) || body["next_cursor"] != nil || body["partial"] != nil {
		t.Fatalf("second page: %d %v %v", status, ids, body)
	}
	// The page says so, and its link reads on.
	_, page := f.boss.get("/admin/approvals?action_class=rare.class")
	if !strings.Contains(page, `data-testid="page-note"`) || !strings.Contains(page, "read 500 packets and none match") ||
		!strings.Contains(page, `data-testid="page-next"`) || !strings.Contains(page, `data-testid="queue-empty"`) {
		t.Fatalf("partial page:\n%s", page)
	}
}

func TestInboxPages_BadCursorOrLimitIs422NamingIt(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 59)
	f.e.user("boss2@example.com", auth.RoleApprover)
	other := f.e.token("boss2@example.com", auth.TokenUser)
	member := f.e.token("owner@example.com", auth.TokenUser)
	_, _, first := queuePage(t, f.e, f.approver, "status=pending")
	cursor := first["next_cursor"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("the cursor is not base64url: %q", cursor)
	}
	raw[len(raw)/2] ^= 1 // a packet further on
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	for _, c := range []struct {
		name, token, query, field string
	}{
		{"altered", f.approver, "status=pending&cursor=" + tampered, "cursor"},
		{"cut short", f.approver, "status=pending&cursor=" + cursor[:20], "cursor"},
		{"not base64", f.approver, "status=pending&cursor=" + url.QueryEscape(strings.Repeat("!", len(cursor))), "cursor"},
		{"another filter", f.approver, "status=pending&risk=high&cursor=" + cursor, "cursor"},
		{"another list", f.approver, "status=approved&cursor=" + cursor, "cursor"},
		{"another user", other, "status=pending&cursor=" + cursor, "cursor"},
		{"limit 0", f.approver, "limit=0", "limit"},
		{"limit 1000", f.approver, "limit=1000", "limit"},
		{"limit not a number", f.approver, "limit=ten", "limit"},
	} {
		status, ids, body := queuePage(t, f.e, c.token, c.query)
		errs, _ := body["errors"].([]any)
		if status != http.StatusUnprocessableEntity || len(ids) != 0 || len(errs) == 0 || errs[0].(map[string]any)["field"] != c.field {
			t.Errorf("%s: %d %v, want 422 naming %s", c.name, status, body, c.field)
		}
	}
	// The caller's rights come first: a member is refused, whatever the page.
	if status, _, body := queuePage(t, f.e, member, "limit=0&cursor=x"); status != http.StatusForbidden {
		t.Errorf("a member with a bad page: %d %v, want 403", status, body)
	}
	// The page: 422, the message next to the filters, the first page.
	resp, body := f.boss.get("/admin/approvals?status=pending&cursor=" + tampered)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="filter-error"`) ||
		!strings.Contains(body, "The page cursor cannot be read") || strings.Count(body, `data-testid="packet"`) != 50 ||
		strings.Contains(body, `data-testid="page-first"`) {
		t.Fatalf("altered cursor on the page: %d\n%s", resp.StatusCode, body)
	}
	resp, body = f.boss.get("/admin/approvals?limit=1000")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "The limit must be a number from 1 to 200.") {
		t.Fatalf("limit 1000 on the page: %d\n%s", resp.StatusCode, body)
	}
}

func TestInboxCounts_StopAtTheirBudgetAndSaySo(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	clonePackets(t, f.e, f.send(t, "a@example.com"), 129)
	f.file(t, "the contract")
	_, body := f.boss.get("/admin/approvals")
	// 131 pending packets: each count reads 100 of them and says so.
	for testid, want := range map[string]string{"status-filter-pending": "100", "status-filter-any": "100", "risk-filter-any": "100",
		"status-filter-approved": "0", "status-filter-expired": "0"} {
		if got := countOf(t, body, testid); got != want {
			t.Errorf("%s = %s, want %s", testid, got, want)
		}
	}
	// The filing (medium) may be among the 100 read, or not.
	if high, medium := countOf(t, body, "risk-filter-high"), countOf(t, body, "risk-filter-medium"); !(high == "100" && medium == "0" || high == "99" && medium == "1") {
		t.Errorf("risk-filter-high = %s, risk-filter-medium = %s", high, medium)
	}
	atLeast := func(testid string) bool {
		return regexp.MustCompile(`data-testid="` + testid + `" data-count="\d+" data-at-least="true"`).MatchString(body)
	}
	for _, testid := range []string{"status-filter-pending", "status-filter-any", "risk-filter-high", "risk-filter-medium", "risk-filter-low", "risk-filter-any"} {
		if !atLeast(testid) {
			t.Errorf("%s does not say it stopped counting", testid)
		}
	}
	for _, testid := range []string{"status-filter-approved", "status-filter-rejected", "status-filter-expired"} {
		if atLeast(testid) {
			t.Errorf("%s says it stopped counting, but it read every packet", testid)
		}
	}
	if !strings.Contains(body, `title="100 among the 100 packets read: the count stops there, so there may be more.">100+</span>`) ||
		!regexp.MustCompile(`data-testid="risk-filter-low"[^>]*>Low <span class="inbox-count" title="[^"]+">0\+</span>`).MatchString(body) {
		t.Errorf("the capped counts are not shown as 100+ and 0+ with their reason:\n%s", body)
	}
	// The header: 99+ packets the approver may resolve.
	if !strings.Contains(body, `data-packets="99+"`) || !regexp.MustCompile(`data-testid="nav-count">99\+<`).MatchString(body) ||
		!strings.Contains(body, "99+ packets you may resolve") {
		t.Errorf("the header's count:\n%s", body)
	}
	// After an action the inbox says how many are left, as counted.
	f.boss.get("/admin/approvals")
	var first string
	f.e.pool.QueryRow(t.Context(), "SELECT id::text FROM approvals WHERE status = 'pending' ORDER BY expires_at, id LIMIT 1").Scan(&first)
	resp, out := f.boss.htmx("POST", "/admin/approvals/"+first+"/reject", url.Values{"reason": {"No."}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(out, " 100+ packets left.") {
		t.Fatalf("after a reject: %d\n%s", resp.StatusCode, out)
	}
}

func TestNav_PacketsCapIsTheServiceCap(t *testing.T) {
	if views.NavPacketsCap != proposals.WaitingPacketsCap {
		t.Fatalf("the header says %d+ past its cap, the service counts to %d", views.NavPacketsCap, proposals.WaitingPacketsCap)
	}
	for _, c := range []struct {
		cards, packets int
		badge, words   string
	}{
		{0, 0, "0", "0 packets"}, {1, 1, "2", "1 packet"}, {2, 99, "101", "99 packets"}, {2, 100, "101+", "99+ packets"},
	} {
		n := views.NavCounts{Cards: c.cards, Packets: c.packets}
		if n.Badge() != c.badge || !strings.Contains(n.Sentence(), c.words+" you may resolve") {
			t.Errorf("%d cards, %d packets: badge %q, %q", c.cards, c.packets, n.Badge(), n.Sentence())
		}
	}
}

// A packet's history shows the latest decided calls of its action class,
// and how each was decided; calls still waiting are not history.
func TestInbox_SimilarCallsAreTheClassDecidedCalls(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	done := f.send(t, "a@example.com")
	f.send(t, "b@example.com") // waits: not history
	open := f.send(t, "c@example.com")
	if status, p := adminJSON(t, f.e, "POST", "/admin/approvals/"+done+"/approve", f.approver, map[string]any{}); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, p)
	}
	_, body := f.boss.get("/admin/approvals/" + open)
	if strings.Count(body, `data-testid="similar-call"`) != 1 || !strings.Contains(body, "Latest decided calls of proposal.submit (1)") ||
		!strings.Contains(body, "<code>t.send</code> · done (by an approver) · <code>{&#34;to&#34;: &#34;a@example.com&#34;}</code>") {
		t.Fatalf("similar calls:\n%s", body)
	}
}
