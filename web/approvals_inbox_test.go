package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// inboxFixture is a workspace with an owner whose agent proposes calls that
// wait for an approver, and an approver signed in to the inbox.
type inboxFixture struct {
	e        *env
	boss     *client
	agent    string
	approver string // the approver's user token (REST)
	conv     string
}

func newInboxFixture(t *testing.T) *inboxFixture {
	t.Helper()
	e := newEnvWith(t, dbtest.MustPool(t), inboxRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	f := &inboxFixture{e: e, boss: e.user("boss@example.com", auth.RoleApprover), agent: e.token("owner@example.com", auth.TokenAgent),
		approver: e.token("boss@example.com", auth.TokenUser)}
	_, conv := e.api("POST", "/api/v1/conversations", f.agent, map[string]any{"title": "Renewals"})
	f.conv = conv["id"].(string)
	return f
}

// inboxRegistry is sendRegistry's tools plus t.file, a medium-risk
// change its contract holds for an approver: the built-in tools gated
// for one are all high risk (ADR-036), and the risk filters need another.
func inboxRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	send := sendRegistry(t)
	decls := []tools.Tool{{Name: "t.file", Effect: policy.EffectMutate, Description: "File a document.",
		Schema: json.RawMessage(`{"type":"object","required":["title"],"properties":{"title":{"type":"string","description":"what"}}}`),
		Contract: tools.Contract{ClassRationale: "A test tool, declared with the class this test needs.", Authority: policy.AuthorityWriteIdempotent, Risk: policy.RiskMedium, ActionClass: "tool.call.local",
			Gating: tools.Gating{Required: true}, Summarize: func(a map[string]any) string { return "File " + a["title"].(string) }},
		Execute: func(context.Context, *db.Queries, uuid.UUID, json.RawMessage) (any, error) {
			return map[string]any{"filed": true}, nil
		}}}
	for _, tool := range send.List() {
		decls = append(decls, *tool)
	}
	r, err := tools.NewRegistry(send.Classes(), decls...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var keyCounter int

// send proposes t.send (high risk: an approver decides).
func (f *inboxFixture) send(t *testing.T, to string) string {
	t.Helper()
	keyCounter++
	resp, p := f.e.api("POST", "/api/v1/conversations/"+f.conv+"/tool-calls", f.agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": to}, "rationale": "the client asked for it", "idempotency_key": fmt.Sprintf("send-%020d", keyCounter)})
	if resp.StatusCode != http.StatusAccepted || p["approval_id"] == nil {
		t.Fatalf("send: %d %v", resp.StatusCode, p)
	}
	return p["approval_id"].(string)
}

// file proposes t.file (medium risk: its contract holds it for an
// approver).
func (f *inboxFixture) file(t *testing.T, title string) string {
	t.Helper()
	resp, p := f.e.api("POST", "/api/v1/conversations/"+f.conv+"/tool-calls", f.agent, map[string]any{"tool": "t.file",
		"arguments": map[string]any{"title": title}, "rationale": "the client sent the document"})
	if resp.StatusCode != http.StatusAccepted || p["approval_id"] == nil {
		t.Fatalf("file: %d %v", resp.StatusCode, p)
	}
	return p["approval_id"].(string)
}

// bulkDelete proposes records.bulk_delete of more than ten keys: high
// risk (destructive), irreversible, held for an approver.
func (f *inboxFixture) bulkDelete(t *testing.T) string {
	t.Helper()
	// Several bulk deletes a minute: more than the irreversible class's
	// default of one per agent, which these tests are not about.
	f.e.pool.Exec(t.Context(), "DELETE FROM rate_counters")
	keyCounter++
	keys := make([]any, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	resp, p := f.e.api("POST", "/api/v1/conversations/"+f.conv+"/tool-calls", f.agent, map[string]any{"tool": "records.bulk_delete",
		"arguments": map[string]any{"collection": "leads", "keys": keys}, "rationale": "the leads are stale", "idempotency_key": fmt.Sprintf("bulk-%020d", keyCounter)})
	if resp.StatusCode != http.StatusAccepted || p["approval_id"] == nil {
		t.Fatalf("bulk delete: %d %v", resp.StatusCode, p)
	}
	return p["approval_id"].(string)
}

func (f *inboxFixture) packetStatus(t *testing.T, id string) string {
	t.Helper()
	var status string
	if err := f.e.pool.QueryRow(t.Context(), "SELECT status FROM approvals WHERE id = $1", id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	return status
}

// htmx sends a request as the inbox's htmx does.
func (c *client) htmx(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	c.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("HX-Request", "true")
	req.Header.Set("X-CSRF-Token", c.csrf)
	req.Header.Set("HX-Current-URL", c.base+"/admin/approvals?status=pending")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, readBody(c.t, resp)
}

func countOf(t *testing.T, body, testid string) string {
	t.Helper()
	m := regexp.MustCompile(`data-testid="` + testid + `" data-count="(\d+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no %s in\n%s", testid, body)
	}
	return m[1]
}

func TestInbox_CountsPerFilter(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	approved, rejected, expired, pending := f.send(t, "a@example.com"), f.send(t, "b@example.com"), f.send(t, "c@example.com"), f.send(t, "d@example.com")
	f.file(t, "the contract")
	if status, p := adminJSON(t, f.e, "POST", "/admin/approvals/"+approved+"/approve", f.approver, map[string]any{}); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, p)
	}
	if status, p := adminJSON(t, f.e, "POST", "/admin/approvals/"+rejected+"/reject", f.approver, map[string]any{"reason": "No."}); status != http.StatusOK {
		t.Fatalf("reject: %d %v", status, p)
	}
	f.e.pool.Exec(t.Context(), "UPDATE approvals SET status = 'expired', resolved_at = now() WHERE id = $1", expired)

	resp, body := f.boss.get("/admin/approvals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("inbox: %d", resp.StatusCode)
	}
	for testid, want := range map[string]string{"status-filter-pending": "2", "status-filter-approved": "1", "status-filter-rejected": "1",
		"status-filter-expired": "1", "status-filter-any": "5",
		// Risks count within the status filter (pending).
		"risk-filter-high": "1", "risk-filter-medium": "1", "risk-filter-low": "0", "risk-filter-any": "2"} {
		if got := countOf(t, body, testid); got != want {
			t.Errorf("%s = %s, want %s", testid, got, want)
		}
	}
	if n := strings.Count(body, `data-testid="packet"`); n != 2 || !strings.Contains(body, pending) {
		t.Fatalf("pending list has %d packets", n)
	}
	// Under a risk filter the statuses count that risk only; the risks
	// count under the status filter.
	_, body = f.boss.get("/admin/approvals?status=&risk=high")
	for testid, want := range map[string]string{"status-filter-pending": "1", "status-filter-approved": "1", "status-filter-any": "4",
		"risk-filter-high": "4", "risk-filter-medium": "1", "risk-filter-any": "5"} {
		if got := countOf(t, body, testid); got != want {
			t.Errorf("risk=high: %s = %s, want %s", testid, got, want)
		}
	}
	if n := strings.Count(body, `data-testid="packet"`); n != 4 {
		t.Fatalf("any status, high risk: %d packets", n)
	}
	// A tool filter narrows every count.
	_, body = f.boss.get("/admin/approvals?tool=t.file")
	if countOf(t, body, "status-filter-pending") != "1" || countOf(t, body, "status-filter-any") != "1" || countOf(t, body, "risk-filter-high") != "0" {
		t.Fatalf("tool filter counts:\n%s", body)
	}
}

func TestInbox_BadFilterValuesAreReadable(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	f.send(t, "a@example.com")
	resp, body := f.boss.get("/admin/approvals?status=bogus&risk=high")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="filter-error"`) ||
		!strings.Contains(body, "&#34;bogus&#34; is not a status") {
		t.Fatalf("bad status: %d\n%s", resp.StatusCode, body)
	}
	// The rest of the page is there: the status falls back to pending, the
	// risk filter still applies.
	if strings.Count(body, `data-testid="packet"`) != 1 || !strings.Contains(body, `aria-current="true">`) {
		t.Fatalf("bad status, the page:\n%s", body)
	}
	resp, body = f.boss.get("/admin/approvals?risk=extreme")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "&#34;extreme&#34; is not a risk") {
		t.Fatalf("bad risk: %d\n%s", resp.StatusCode, body)
	}
	resp, body = f.boss.get("/admin/approvals?selected=not-a-packet")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="detail-message"`) || !strings.Contains(body, "That packet link is not valid") {
		t.Fatalf("bad selection: %d\n%s", resp.StatusCode, body)
	}
	// JSON callers get problem+json naming the field.
	req, _ := http.NewRequest("GET", f.e.url+"/admin/approvals?status=bogus", nil)
	req.Header.Set("Authorization", "Bearer "+f.approver)
	req.Header.Set("Accept", "application/json")
	jr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	jb := readBody(t, jr)
	if jr.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(jr.Header.Get("Content-Type"), "problem+json") || !strings.Contains(jb, `"status"`) {
		t.Fatalf("bad status as JSON: %d %s %s", jr.StatusCode, jr.Header.Get("Content-Type"), jb)
	}
}

func TestInbox_SelectionAndDeepLinkRenderTheDetail(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	first, second := f.send(t, "a@example.com"), f.send(t, "b@example.com")
	detailOf := regexp.MustCompile(`data-testid="approval" data-id="([^"]+)"`)
	// Without a selection the first packet is open.
	_, body := f.boss.get("/admin/approvals")
	if m := detailOf.FindStringSubmatch(body); m == nil || m[1] != first {
		t.Fatalf("default selection: %v", m)
	}
	for _, path := range []string{"/admin/approvals/" + second, "/admin/approvals?selected=" + second} {
		resp, body := f.boss.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if m := detailOf.FindStringSubmatch(body); m == nil || m[1] != second {
			t.Fatalf("%s opens %v", path, m)
		}
		// The list marks it, and the page is the whole inbox.
		row := regexp.MustCompile(`(?s)data-id="` + second + `".*?data-testid="packet-link"[^>]*aria-current="true"`)
		if !row.MatchString(body) || strings.Count(body, `data-testid="packet"`) != 2 {
			t.Fatalf("%s: the row is not marked selected\n%s", path, body)
		}
		for _, want := range []string{"Send to b@example.com", "agent “test agent” of owner@example.com", ">Renewals</a>",
			`data-testid="held-layer"`, `data-testid="countdown"`, "expires in 23 h", `href="/audit?object=` + second + `"`,
			"the client asked for it", `data-testid="approve"`, `data-testid="reject-reason"`, `<script src="/static/inbox.js" defer>`,
			`href="/static/inbox.css"`} {
			if !strings.Contains(body, want) {
				t.Fatalf("%s lacks %q\n%s", path, want, body)
			}
		}
	}
	// The held layer is the strictest one: the risk gate, for a high-risk
	// send.
	if !regexp.MustCompile(`data-layer="risk" data-held="true"`).MatchString(body) {
		_, body = f.boss.get("/admin/approvals/" + second)
		if !regexp.MustCompile(`data-layer="risk" data-held="true"`).MatchString(body) {
			t.Fatalf("the risk layer is not the one that held the call:\n%s", body)
		}
	}
	// The inbox's htmx asks for the detail pane alone.
	resp, frag := f.boss.htmx("GET", "/admin/approvals/"+second, nil, map[string]string{"HX-Target": "detail"})
	if resp.StatusCode != http.StatusOK || strings.Contains(frag, "<html") || !strings.Contains(frag, `id="detail"`) || !strings.Contains(frag, second) {
		t.Fatalf("detail fragment: %d\n%s", resp.StatusCode, frag)
	}
	// A live refresh of the list keeps the selection it is given, and
	// leaves the open packet alone.
	resp, frag = f.boss.htmx("GET", "/admin/approvals?status=pending&selected="+second, nil, map[string]string{"HX-Target": "inbox-list"})
	if resp.StatusCode != http.StatusOK || !regexp.MustCompile(`(?s)data-id="`+second+`".*?data-testid="packet-link"[^>]*aria-current="true"`).MatchString(frag) ||
		strings.Contains(frag, `data-testid="approval"`) {
		t.Fatalf("list refresh: %d\n%s", resp.StatusCode, frag)
	}
	// A packet that is not there: 404, with the inbox and a message.
	resp, body = f.boss.get("/admin/approvals/" + uuid.NewString())
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "No such packet here") || strings.Count(body, `data-testid="packet"`) != 2 {
		t.Fatalf("unknown packet: %d\n%s", resp.StatusCode, body)
	}
	// Resolved, it says who decided and when.
	f.boss.get("/admin/approvals")
	if resp, _ := f.boss.postForm("/admin/approvals/"+first+"/reject", url.Values{"reason": {"Not needed now."}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	_, body = f.boss.get("/admin/approvals/" + first)
	if !strings.Contains(body, `data-testid="resolved-by">boss@example.com`) || !strings.Contains(body, "just now") || !strings.Contains(body, "Not needed now.") {
		t.Fatalf("resolved packet:\n%s", body)
	}
}

func TestInbox_IrreversibleNeedsTheSecondConfirmation(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	del, send := f.bulkDelete(t), f.send(t, "a@example.com")
	_, body := f.boss.get("/admin/approvals/" + del)
	if !regexp.MustCompile(`data-testid="approve" data-irreversible="Approving runs Delete 12 records from collection &#34;leads&#34; at once and destroys data; it cannot be undone."`).MatchString(body) {
		t.Fatalf("the approve button does not ask for the confirmation:\n%s", body)
	}
	_, body = f.boss.get("/admin/approvals/" + send)
	if strings.Contains(body, `data-testid="approve" data-irreversible`) {
		t.Fatal("a send asks for the irreversible confirmation")
	}
	// Without irreversible_ack: 422, the reason next to the button, nothing done.
	resp, body := f.boss.postForm("/admin/approvals/"+del+"/approve", nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !regexp.MustCompile(`data-testid="approve-error">[^<]*cannot be undone`).MatchString(body) {
		t.Fatalf("approve without the confirmation: %d\n%s", resp.StatusCode, body)
	}
	resp, body = f.boss.htmx("POST", "/admin/approvals/"+del+"/approve", url.Values{}, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `id="inbox"`) || !strings.Contains(body, "Confirm that you mean it") {
		t.Fatalf("approve from the inbox without the confirmation: %d\n%s", resp.StatusCode, body)
	}
	// Bulk approve skips it without the confirmation and says so.
	resp, body = f.boss.htmx("POST", "/admin/approvals/bulk", url.Values{"action": {"approve"}, "ids": {del}, "query": {"status=pending"}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Approved 0 of 1 selected.") || !strings.Contains(body, "cannot be undone: confirm it") {
		t.Fatalf("bulk approve without the confirmation: %d\n%s", resp.StatusCode, body)
	}
	if s := f.packetStatus(t, del); s != "pending" {
		t.Fatalf("without the confirmation the packet is %s", s)
	}
	// With it, it runs.
	resp, body = f.boss.postForm("/admin/approvals/"+del+"/approve", url.Values{"irreversible_ack": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve with the confirmation: %d\n%s", resp.StatusCode, body)
	}
	if s := f.packetStatus(t, del); s != "approved" {
		t.Fatalf("with the confirmation the packet is %s", s)
	}
	// REST is unchanged: a token approves without it.
	del2 := f.bulkDelete(t)
	if status, p := adminJSON(t, f.e, "POST", "/admin/approvals/"+del2+"/approve", f.approver, map[string]any{}); status != http.StatusOK {
		t.Fatalf("REST approve: %d %v", status, p)
	}
	// A plain send needs no confirmation from the page.
	if resp, body := f.boss.postForm("/admin/approvals/"+send+"/approve", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("send: %d\n%s", resp.StatusCode, body)
	}
}

func TestInbox_ActionsOpenTheNextPacketAndSayWhatWasDone(t *testing.T) {
	t.Parallel()
	f := newInboxFixture(t)
	a, b, c := f.send(t, "a@example.com"), f.send(t, "b@example.com"), f.send(t, "c@example.com")
	f.boss.get("/admin/approvals")
	detailOf := regexp.MustCompile(`data-testid="approval" data-id="([^"]+)"`)
	resp, body := f.boss.htmx("POST", "/admin/approvals/"+a+"/approve", url.Values{}, map[string]string{"X-Inbox-Next": c})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Approved t.send: Send to a@example.com. 2 packets left.") {
		t.Fatalf("approve: %d\n%s", resp.StatusCode, body)
	}
	if m := detailOf.FindStringSubmatch(body); m == nil || m[1] != c {
		t.Fatalf("after approve the open packet is %v, want the next one asked for", m)
	}
	// A reject without a reason: the message next to the reason, 422.
	resp, body = f.boss.htmx("POST", "/admin/approvals/"+b+"/reject", url.Values{"reason": {" "}}, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !regexp.MustCompile(`data-testid="reject-error">\s*Give a reason`).MatchString(body) {
		t.Fatalf("reject without a reason: %d\n%s", resp.StatusCode, body)
	}
	// A stale packet (approved already): 409, said next to the button, the
	// inbox still there.
	resp, body = f.boss.htmx("POST", "/admin/approvals/"+a+"/approve", url.Values{}, nil)
	if resp.StatusCode != http.StatusConflict || !regexp.MustCompile(`data-testid="approve-error">[^<]*was approved already`).MatchString(body) ||
		!strings.Contains(body, `id="inbox"`) {
		t.Fatalf("stale approve: %d\n%s", resp.StatusCode, body)
	}
	// Bulk reject without a reason: 422 next to the bulk controls, the
	// selection kept.
	resp, body = f.boss.htmx("POST", "/admin/approvals/bulk", url.Values{"action": {"reject"}, "ids": {b, c}, "query": {"status=pending"}}, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !regexp.MustCompile(`data-testid="bulk-error" role="alert">Give a reason`).MatchString(body) ||
		strings.Count(body, `form="bulk" checked`) != 2 {
		t.Fatalf("bulk reject without a reason: %d\n%s", resp.StatusCode, body)
	}
	resp, body = f.boss.htmx("POST", "/admin/approvals/bulk", url.Values{"action": {"reject"}, "reason": {"Not needed now."}, "ids": {b, c}, "query": {"status=pending"}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Rejected 2 of 2 selected. Nothing else is waiting here.") || !strings.Contains(body, `data-testid="queue-empty"`) {
		t.Fatalf("bulk reject: %d\n%s", resp.StatusCode, body)
	}
	for _, id := range []string{b, c} {
		if s := f.packetStatus(t, id); s != "rejected" {
			t.Fatalf("%s is %s", id, s)
		}
	}
}
