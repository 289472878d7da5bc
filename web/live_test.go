package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// stream is an open server-sent event stream.
type stream struct {
	t    *testing.T
	r    *bufio.Reader
	stop context.CancelFunc
}

// events opens path's event stream as c; the stream closes at the end of
// the test. It returns the status and, when 200, the stream.
func (c *client) events(path string) (int, *stream) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		readBody(c.t, resp)
		cancel()
		return resp.StatusCode, nil
	}
	s := &stream{t: c.t, r: bufio.NewReader(resp.Body), stop: cancel}
	c.t.Cleanup(func() { cancel(); resp.Body.Close() })
	if line, err := s.r.ReadString('\n'); err != nil || line != ": connected\n" {
		c.t.Fatalf("stream %s opened with %q, %v", path, line, err)
	}
	return resp.StatusCode, s
}

// next returns the next event's name and data, failing after 15 s.
func (s *stream) next() (string, string) {
	s.t.Helper()
	type ev struct{ name, data string }
	got := make(chan ev, 1)
	go func() {
		var e ev
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				e.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				e.data = strings.TrimPrefix(line, "data: ")
			case line == "" && e.name != "":
				got <- e
				return
			}
		}
	}()
	select {
	case e, ok := <-got:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return e.name, e.data
	case <-time.After(15 * time.Second):
		s.t.Fatal("no event within 15 s")
	}
	return "", ""
}

// nextNamed skips events until one named name arrives and returns its data.
func (s *stream) nextNamed(name string) string {
	s.t.Helper()
	for range 20 {
		if n, d := s.next(); n == name {
			return d
		}
	}
	s.t.Fatalf("no %q event among the next 20", name)
	return ""
}

func TestLiveEvents_StreamsAreAuthorisedLikeTheirPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	other := e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	_, nb := e.api("POST", "/api/v1/notebooks", agent, map[string]any{})
	convPath, nbPath := "/conversations/"+conv["id"].(string), "/notebooks/"+nb["id"].(string)
	for _, path := range []string{convPath, nbPath} {
		if resp, _ := other.get(path); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another member opens %s: %d", path, resp.StatusCode)
		}
		if status, _ := other.events(path + "/events"); status != http.StatusNotFound {
			t.Fatalf("another member follows %s: %d, want 404 like the page", path, status)
		}
		if resp, _ := other.get(path + "/transcript?mode=approve"); strings.HasPrefix(path, "/conversations") && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another member reads %s's transcript: %d", path, resp.StatusCode)
		}
		if resp, _ := other.get(path + "/cells?after=0"); strings.HasPrefix(path, "/notebooks") && resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another member reads %s's cells: %d", path, resp.StatusCode)
		}
		if status, s := owner.events(path + "/events"); status != http.StatusOK || s == nil {
			t.Fatalf("the owner follows %s: %d", path, status)
		}
	}
	if status, _ := owner.events("/conversations/not-an-id/events"); status != http.StatusNotFound {
		t.Fatalf("a bad id: %d", status)
	}
	if status, _ := e.client().events("/events"); status == http.StatusOK {
		t.Fatal("a signed-out visitor follows /events")
	}
	if status, _ := owner.events("/admin/approvals/events"); status != http.StatusForbidden {
		t.Fatalf("a member follows the approvals queue: %d", status)
	}
}

func TestLiveEvents_AProposalOnOneInstanceReachesTheOwnersPagesOnAnother(t *testing.T) {
	t.Parallel()
	pool := dbtest.MustPool(t)
	registry := sendRegistry(t)
	e := newEnvWith(t, pool, registry)
	second := newEnvWith(t, pool, registry)
	owner := e.user("owner@example.com", auth.RoleMember)
	other := e.user("other@example.com", auth.RoleMember)
	boss := e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	otherAgent := e.token("other@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	_, otherConv := e.api("POST", "/api/v1/conversations", otherAgent, map[string]any{})
	convID := conv["id"].(string)

	_, convStream := owner.events("/conversations/" + convID + "/events")
	_, home := owner.events("/events")
	_, otherHome := other.events("/events")
	_, queue := boss.events("/admin/approvals/events")
	_, bossHome := boss.events("/events")

	// The agent proposes through the second instance.
	resp, p := second.api("POST", "/api/v1/conversations/"+convID+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "the owner asked for it"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	if d := convStream.nextNamed("conversation"); d != "conversation."+convID {
		t.Fatalf("conversation event data %q", d)
	}
	ownerID := e.userID("owner@example.com")
	if d := home.nextNamed("user"); d != "user."+ownerID {
		t.Fatalf("home event data %q", d)
	}
	// Another member's home hears only of their own: the first event it
	// gets is about their agent's call, not the owner's.
	second.api("POST", "/api/v1/conversations/"+otherConv["id"].(string)+"/messages", otherAgent, map[string]any{"role": "assistant", "content": "hello"})
	second.api("POST", "/api/v1/conversations/"+otherConv["id"].(string)+"/tool-calls", otherAgent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "the other asked for it"})
	if n, d := otherHome.next(); n != "user" || d != "user."+e.userID("other@example.com") {
		t.Fatalf("the other member's home got %s %q first", n, d)
	}

	// A deferred call opens a packet: the queue and approvers' homes hear.
	resp, p = second.api("POST", "/api/v1/conversations/"+convID+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "acme"}, "rationale": "the client asked for it", "idempotency_key": "live-send-0000001"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending_approval" {
		t.Fatalf("deferred: %d %v", resp.StatusCode, p)
	}
	if n, _ := queue.next(); n != "approvals" {
		t.Fatalf("the queue got %q", n)
	}
	bossHome.nextNamed("approvals")
	convStream.nextNamed("conversation")

	// The page's fragments re-render from the database on any instance.
	_, frag := owner.get("/conversations/" + convID)
	if strings.Count(frag, `data-testid="proposal-card"`) != 2 {
		t.Fatalf("the transcript does not show both cards:\n%s", frag)
	}
	_, homePage := owner.get("/")
	if !strings.Contains(homePage, `data-testid="waiting-card"`) || !strings.Contains(homePage, `data-cards="1"`) ||
		!strings.Contains(homePage, "test agent") {
		t.Fatalf("home does not show the waiting card and the count:\n%s", homePage)
	}
	_, bossPage := boss.get("/")
	if !strings.Contains(bossPage, `data-testid="waiting-packet"`) || !strings.Contains(bossPage, `data-packets="1"`) {
		t.Fatalf("the approver's home does not show the packet:\n%s", bossPage)
	}
	_, live := owner.get("/home/live")
	if !strings.Contains(live, `id="needs-me" class="needs-me" data-testid="needs-me" hx-swap-oob="true"`) || !strings.Contains(live, `id="nav-counts"`) {
		t.Fatalf("home's live fragment:\n%s", live)
	}
	// The owner's own agent cannot resolve its packet, and the owner does
	// not see it as theirs to resolve.
	if strings.Contains(homePage, `data-testid="waiting-packet"`) {
		t.Fatal("a member sees packets to resolve")
	}
}

func TestAuditPage_FiltersScopingAndPages(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	admin := e.user("admin@example.com", auth.RoleAdmin)
	owner := e.user("owner@example.com", auth.RoleMember)
	other := e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	otherAgent := e.token("other@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	_, otherConv := e.api("POST", "/api/v1/conversations", otherAgent, map[string]any{})
	convID, otherConvID := conv["id"].(string), otherConv["id"].(string)
	_, p := e.api("POST", "/api/v1/conversations/"+convID+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "acme"}, "rationale": "the client asked for it", "idempotency_key": "audit-send-0000001"})
	proposalID, approvalID := p["proposal_id"].(string), p["approval_id"].(string)
	admin.get("/admin/approvals/" + approvalID)
	if resp, body := admin.postForm("/admin/approvals/"+approvalID+"/reject", url.Values{"reason": {"not today"}}); resp.StatusCode >= 400 {
		t.Fatalf("reject: %d\n%s", resp.StatusCode, body)
	}

	rows := func(c *client, query string) []string {
		t.Helper()
		resp, page := c.get("/audit?" + query)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/audit?%s: %d\n%s", query, resp.StatusCode, page)
		}
		var out []string
		for _, m := range regexp.MustCompile(`data-testid="audit-row" data-id="\d+" data-action="([a-z_.]+)"`).FindAllStringSubmatch(page, -1) {
			out = append(out, m[1])
		}
		return out
	}
	has := func(list []string, action string) bool {
		for _, a := range list {
			if a == action {
				return true
			}
		}
		return false
	}

	// The object filter finds a call's rows by its proposal id and by its
	// packet's id: the proposal's own and the packet's.
	for _, obj := range []string{proposalID, approvalID} {
		got := rows(admin, "object="+obj)
		if !has(got, "proposal.created") || !has(got, "approval.rejected") {
			t.Fatalf("object=%s: %v", obj, got)
		}
	}
	if got := rows(admin, "object="+convID); !has(got, "conversation.created") {
		t.Fatalf("object=<conversation>: %v", got)
	}
	if got := rows(admin, "action=approval.rejected"); len(got) != 1 {
		t.Fatalf("action filter: %v", got)
	}
	if got := rows(admin, "actor=admin@example.com"); len(got) == 0 || has(got, "conversation.created") {
		t.Fatalf("actor filter: %v", got)
	}
	if got := rows(admin, "from=2000-01-01&to=2000-01-02"); len(got) != 0 {
		t.Fatalf("a range in the past: %v", got)
	}
	if got := rows(admin, "from="+time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")); len(got) == 0 {
		t.Fatal("the last hour has no rows")
	}

	// Members see their own scopes' rows (the approver's rejection of the
	// owner's call too), never another member's.
	if got := rows(owner, "object="+proposalID); !has(got, "approval.rejected") {
		t.Fatalf("the owner does not see the rejection of their call: %v", got)
	}
	if got := rows(owner, "object="+otherConvID); len(got) != 0 {
		t.Fatalf("the owner sees another member's conversation: %v", got)
	}
	if got := rows(other, "object="+proposalID); len(got) != 0 {
		t.Fatalf("another member sees the owner's call: %v", got)
	}
	if got := rows(other, ""); !has(got, "conversation.created") || len(got) != 1 {
		t.Fatalf("the other member's log: %v", got)
	}

	// Bad filters: a readable message next to each field, 422, no 500.
	for query, field := range map[string]string{"from=yesterday": "from", "to=31/12/2026": "to", "action=DROP TABLE": "action",
		"actor=nobody@example.com": "actor", "before=-3": "before", "from=2026-02-01&to=2026-01-01": "to"} {
		resp, page := admin.get("/audit?" + url.PathEscape(query))
		resp2, page2 := admin.get("/audit?" + strings.ReplaceAll(query, " ", "+"))
		if resp.StatusCode != http.StatusUnprocessableEntity && resp2.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("%s: %d\n%s", query, resp.StatusCode, page)
		}
		if field != "before" && !strings.Contains(page+page2, `data-testid="audit-`+field+`-error"`) {
			t.Fatalf("%s: no message next to %s:\n%s", query, field, page2)
		}
	}

	// Keyset pages of 50, newest first, filters kept in the links.
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO audit_events (workspace_id, actor_kind, action, subject_type, subject_id)
		SELECT $1, 'system', 'test.paged', 'thing', 'x' || g FROM generate_series(1, 60) g`, e.ws); err != nil {
		t.Fatal(err)
	}
	_, page := admin.get("/audit?action=test.paged")
	first := regexp.MustCompile(`data-testid="audit-row"`).FindAllString(page, -1)
	next := regexp.MustCompile(`href="(/audit\?[^"]+)" rel="next"`).FindStringSubmatch(page)
	if len(first) != 50 || next == nil || !strings.Contains(next[1], "action=test.paged") || !strings.Contains(page, "thing x60") {
		t.Fatalf("first page: %d rows, next %v", len(first), next)
	}
	_, page = admin.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if n := strings.Count(page, `data-testid="audit-row"`); n != 10 || strings.Contains(page, `rel="next"`) || !strings.Contains(page, "thing x1<") {
		t.Fatalf("second page: %d rows\n%s", n, page)
	}
	// Settings link to the workspace's rows.
	_, settings := admin.get("/admin/settings")
	if !strings.Contains(settings, `href="/audit?object=`+e.ws+`"`) {
		t.Fatal("the settings page does not link its audit rows")
	}
}

// TestViews_NoPolling: live pages follow events; no template polls.
func TestViews_NoPolling(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../views/*.templ")
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v %v", files, err)
	}
	every := regexp.MustCompile(`hx-trigger=\{?\s*"[^"]*\bevery\s`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := every.Find(b); m != nil {
			t.Errorf("%s polls: %s", f, m)
		}
	}
}

// userID is the id of the user with this email.
func (e *env) userID(email string) string {
	e.t.Helper()
	var id string
	if err := e.pool.QueryRow(context.Background(), "SELECT id::text FROM users WHERE email = $1", email).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id
}
