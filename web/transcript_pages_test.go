package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// longConversation is a conversation of the owner's with, in order: a
// card (an agent's call waiting for the owner), bulk lines "line 1" to
// "line n" written with SQL, and an agent's "the last word".
type longConversation struct {
	e        *env
	owner    *client
	agent    string
	id, path string
	card     string // the card's proposal id
	total    int    // lines in the transcript
	lastWord string
}

func newLongConversation(t *testing.T, n int) *longConversation {
	t.Helper()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "long"})
	id := conv["id"].(string)
	resp, p := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "the owner asked for it"})
	if resp.StatusCode != http.StatusAccepted || p["status"] != "pending" {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	bulkLines(t, e, id, 1, n)
	if resp, _ := e.api("POST", "/api/v1/conversations/"+id+"/messages", agent, map[string]any{"role": "assistant", "content": "the last word"}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("post: %d", resp.StatusCode)
	}
	return &longConversation{e: e, owner: owner, agent: agent, id: id, path: "/conversations/" + id, card: p["proposal_id"].(string),
		total: n + 2, lastWord: "the last word"}
}

// bulkLines writes "line from" to "line to" in the conversation, as the
// owner's assistant would, in one statement.
func bulkLines(t *testing.T, e *env, conv string, from, to int) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `
		INSERT INTO messages (workspace_id, conversation_id, role, content, author_user_id)
		SELECT c.workspace_id, c.id, 'assistant', 'line ' || i, c.owner_id
		FROM conversations c, generate_series($2::int, $3::int) i WHERE c.id = $1
		ORDER BY i`, conv, from, to); err != nil {
		t.Fatal(err)
	}
}

var (
	lineItem     = regexp.MustCompile(`<li[^>]* class="line (?:user|assistant|tool|notice)"`)
	messageText  = regexp.MustCompile(`<span class="role">[a-z]+</span> ([^<]*)</li>`)
	earlierHref  = regexp.MustCompile(`href="([^"]*\?before=[^"]*)"[^>]*data-testid="transcript-earlier"`)
	earlierFrag  = regexp.MustCompile(`hx-get="([^"]*/transcript\?before=[^"]*)"`)
	afterCursor  = regexp.MustCompile(`id="transcript-after" class="live-state" name="after" value="([^"]*)"`)
	laterSection = regexp.MustCompile(`data-testid="transcript-later"`)
)

// texts are the message lines' words in the order of the HTML.
func texts(page string) []string {
	var out []string
	for _, m := range messageText.FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(strings.TrimSpace(m[1])))
	}
	return out
}

func match(t *testing.T, re *regexp.Regexp, page, what string) string {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no %s in:\n%.3000s", what, page)
	}
	return html.UnescapeString(m[1])
}

func TestConversationPage_ShowsTheLatestLinesAndEarlierOnesOnRequest(t *testing.T) {
	t.Parallel()
	lc := newLongConversation(t, 600)
	_, page := lc.owner.get(lc.path)
	if n := len(lineItem.FindAllString(page, -1)); n != 50 {
		t.Fatalf("the page shows %d lines, want the latest 50", n)
	}
	got := texts(page)
	if got[0] != "line 552" || got[len(got)-1] != lc.lastWord {
		t.Fatalf("the page shows %q … %q, want line 552 … %q", got[0], got[len(got)-1], lc.lastWord)
	}
	if laterSection.MatchString(page) {
		t.Fatal("the latest page links to later lines")
	}
	match(t, afterCursor, page, "live cursor")

	// Without JavaScript: Earlier links walk back a page at a time, to the
	// first line, each line once and in order; a window of earlier lines
	// links to later ones and adds no lines live.
	seen := got
	href := match(t, earlierHref, page, "Earlier link")
	for pages := 0; href != ""; pages++ {
		if pages > 20 {
			t.Fatal("the Earlier links do not end")
		}
		resp, window := lc.owner.get(href)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", href, resp.StatusCode)
		}
		if !laterSection.MatchString(window) || afterCursor.MatchString(window) {
			t.Fatalf("a window of earlier lines has no Later link, or a live cursor:\n%.2000s", window)
		}
		seen = append(texts(window), seen...)
		href = ""
		if m := earlierHref.FindStringSubmatch(window); m != nil {
			href = html.UnescapeString(m[1])
		} else if !strings.Contains(window, `data-testid="proposal-card"`) || !strings.Contains(window, "agent token") {
			// The first page holds the card, its proposer named (read with
			// the page's other cards in one query).
			t.Fatalf("the first page does not show the card and its proposer:\n%.3000s", window)
		}
	}
	want := []string{}
	for i := 1; i <= 600; i++ {
		want = append(want, "line "+strconv.Itoa(i))
	}
	want = append(want, lc.lastWord)
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("walking back shows %d message lines, want the %d in order", len(seen), len(want))
	}

	// With htmx: the control's fragment puts the page before above the
	// lines shown, and replaces itself with the control for the page
	// before that.
	resp, frag := lc.owner.get(match(t, earlierFrag, page, "Earlier fragment"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `hx-swap-oob="afterbegin:#transcript"`) ||
		!strings.Contains(frag, `id="transcript-earlier"`) || len(lineItem.FindAllString(frag, -1)) != 50 {
		t.Fatalf("Earlier fragment: %d\n%.2000s", resp.StatusCode, frag)
	}
	if got := texts(frag); got[0] != "line 502" || got[49] != "line 551" {
		t.Fatalf("the Earlier fragment shows %q … %q, want line 502 … line 551", got[0], got[49])
	}
}

func TestTranscriptFeed_SendsOnlyTheLinesAfterThePage(t *testing.T) {
	t.Parallel()
	lc := newLongConversation(t, 300)
	_, page := lc.owner.get(lc.path)
	cursor := match(t, afterCursor, page, "live cursor")
	feed := func(after string, extra ...string) string {
		t.Helper()
		q := url.Values{"after": {after}}
		for i := 0; i+1 < len(extra); i += 2 {
			q.Add(extra[i], extra[i+1])
		}
		resp, frag := lc.owner.get(lc.path + "/transcript?" + q.Encode())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("feed: %d\n%s", resp.StatusCode, frag)
		}
		return frag
	}
	if frag := feed(cursor); strings.Contains(frag, "#transcript") || lineItem.MatchString(frag) {
		t.Fatalf("nothing is new, yet the feed sends lines:\n%s", frag)
	}
	for _, text := range []string{"one more", "and another"} {
		lc.e.api("POST", "/api/v1/conversations/"+lc.id+"/messages", lc.agent, map[string]any{"role": "assistant", "content": text})
	}
	frag := feed(cursor)
	if got := texts(frag); fmt.Sprint(got) != "[one more and another]" || !strings.Contains(frag, `hx-swap-oob="beforeend:#transcript"`) {
		t.Fatalf("the feed sends %q, want the two new lines:\n%s", got, frag)
	}
	next := match(t, regexp.MustCompile(`id="transcript-after" class="live-state" name="after" value="([^"]*)" hx-swap-oob="true"`), frag, "new cursor")
	if frag := feed(next); lineItem.MatchString(frag) {
		t.Fatalf("the new cursor gets lines again:\n%s", frag)
	}

	// The cards the page names are re-read by id: a stale version comes
	// back, a current one does not, and another conversation's is not
	// found.
	_, other := lc.e.api("POST", "/api/v1/conversations", lc.agent, map[string]any{})
	_, otherCard := lc.e.api("POST", "/api/v1/conversations/"+other["id"].(string)+"/tool-calls", lc.agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{}}, "rationale": "the owner asked for it"})
	frag = feed(next, "card", lc.card+":applied.0", "card", otherCard["proposal_id"].(string)+":applied.0", "card", "not-a-card")
	if strings.Count(frag, `data-testid="proposal-card"`) != 1 || !strings.Contains(frag, `id="line-`+lc.card+`"`) {
		t.Fatalf("the feed re-sends %d cards, want the page's one stale card:\n%s", strings.Count(frag, `data-testid="proposal-card"`), frag)
	}
	current := match(t, regexp.MustCompile(`name="card" value="([^"]*)"`), frag, "card version")
	if frag := feed(next, "card", current); strings.Contains(frag, "proposal-card") {
		t.Fatalf("an unchanged card is sent again:\n%s", frag)
	}

	// More lines than a page since the page's cursor: the feed sends the
	// latest page in place of the transcript, with its Earlier control.
	bulkLines(t, lc.e, lc.id, 1000, 1080)
	frag = feed(next)
	if !strings.Contains(frag, `hx-swap-oob="innerHTML:#transcript"`) || len(lineItem.FindAllString(frag, -1)) != 50 ||
		!strings.Contains(frag, `id="transcript-earlier" class="transcript-earlier" hx-swap-oob="true"`) {
		t.Fatalf("a page far behind is not reset to the latest page:\n%.2000s", frag)
	}
	if got := texts(frag); got[0] != "line 1031" || got[49] != "line 1080" {
		t.Fatalf("the reset shows %q … %q", got[0], got[49])
	}

	// A window of earlier lines sends no cursor: the feed adds no lines.
	if resp, frag := lc.owner.get(lc.path + "/transcript?mode=approve"); resp.StatusCode != http.StatusOK || lineItem.MatchString(frag) {
		t.Fatalf("without a cursor: %d\n%s", resp.StatusCode, frag)
	}
	// A page from before cursors (it counted its lines) reloads.
	if resp, _ := lc.owner.get(lc.path + "/transcript?lines=3"); resp.Header.Get("HX-Refresh") != "true" {
		t.Fatalf("a page counting lines is not reloaded: %d %v", resp.StatusCode, resp.Header)
	}
}

// messagePage is one page of the messages API.
func messagePage(t *testing.T, e *env, token, path string) (ids []int64, prev, next string) {
	t.Helper()
	resp, body := e.api("GET", path, token, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", path, resp.StatusCode, body)
	}
	for _, m := range body["messages"].([]any) {
		ids = append(ids, int64(m.(map[string]any)["id"].(float64)))
	}
	prev, _ = body["prev"].(string)
	next, _ = body["next"].(string)
	if next == "" {
		t.Fatalf("%s: no next cursor", path)
	}
	return ids, prev, next
}

func TestConversationMessagesAPI_PagesEveryMessageOnceInOrder(t *testing.T) {
	t.Parallel()
	lc := newLongConversation(t, 600)
	e, base := lc.e, "/api/v1/conversations/"+lc.id+"/messages"
	var want []int64
	rows, err := e.pool.Query(context.Background(), "SELECT id FROM transcript_lines WHERE conversation_id = $1 ORDER BY id", lc.id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		want = append(want, id)
	}
	if len(want) != lc.total {
		t.Fatalf("%d messages, want %d", len(want), lc.total)
	}

	// Backwards from the latest page (100 by default), by prev.
	ids, prev, latestNext := messagePage(t, e, lc.agent, base)
	if len(ids) != 100 || ids[99] != want[len(want)-1] {
		t.Fatalf("the first page has %d messages ending at %d", len(ids), ids[len(ids)-1])
	}
	all := ids
	var oldest []int64
	var oldestNext string
	for pages := 0; prev != ""; pages++ {
		if pages > 10 {
			t.Fatal("prev cursors do not end")
		}
		oldest, prev, oldestNext = messagePage(t, e, lc.agent, base+"?limit=250&before="+prev)
		all = append(oldest, all...)
	}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatalf("backwards: %d messages, want each of the %d once in order", len(all), len(want))
	}

	// Forwards from the oldest page, by next: a page shorter than the
	// limit is the end.
	all, next := oldest, oldestNext
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("next cursors do not end")
		}
		ids, _, n := messagePage(t, e, lc.agent, base+"?limit=70&after="+next)
		all, next = append(all, ids...), n
		if len(ids) < 70 {
			break
		}
	}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatalf("forwards: %d messages, want each of the %d once in order", len(all), len(want))
	}

	// Following the conversation: the latest page's next gets what comes
	// after it, and nothing else.
	if ids, _, _ := messagePage(t, e, lc.agent, base+"?after="+latestNext); len(ids) != 0 {
		t.Fatalf("nothing is new, yet %d messages", len(ids))
	}
	_, m := e.api("POST", base, lc.agent, map[string]any{"role": "assistant", "content": "news"})
	if ids, prev, _ := messagePage(t, e, lc.agent, base+"?after="+latestNext); len(ids) != 1 || ids[0] != int64(m["id"].(float64)) || prev == "" {
		t.Fatalf("after the latest page: %v (prev %q), want the new message and a prev cursor", ids, prev)
	}
}

func TestConversationMessages_RefusesForeignCursorsAndLimits(t *testing.T) {
	t.Parallel()
	lc := newLongConversation(t, 120)
	e, base := lc.e, "/api/v1/conversations/"+lc.id+"/messages"
	_, prev, next := messagePage(t, e, lc.agent, base)

	// Another conversation of the same owner, and another user's.
	_, conv2 := e.api("POST", "/api/v1/conversations", lc.agent, map[string]any{})
	e.api("POST", "/api/v1/conversations/"+conv2["id"].(string)+"/messages", lc.agent, map[string]any{"role": "assistant", "content": "x"})
	e.api("POST", "/api/v1/conversations/"+conv2["id"].(string)+"/messages", lc.agent, map[string]any{"role": "assistant", "content": "y"})
	_, _, next2 := messagePage(t, e, lc.agent, "/api/v1/conversations/"+conv2["id"].(string)+"/messages?limit=1")
	_, prev2, _ := messagePage(t, e, lc.agent, "/api/v1/conversations/"+conv2["id"].(string)+"/messages?limit=1")
	e.user("other@example.com", auth.RoleMember)
	otherAgent := e.token("other@example.com", auth.TokenAgent)
	_, conv3 := e.api("POST", "/api/v1/conversations", otherAgent, map[string]any{})
	_, _, next3 := messagePage(t, e, otherAgent, "/api/v1/conversations/"+conv3["id"].(string)+"/messages")

	tampered := []byte(prev)
	tampered[5] ^= 1 // a letter or digit still
	if tampered[5] == '-' || tampered[5] == '_' {
		tampered[5] = 'A'
	}
	cases := []struct{ name, query, field string }{
		{"tampered", "before=" + string(tampered), "before"},
		{"truncated", "before=" + prev[:len(prev)-2], "before"},
		{"not base64", "after=" + strings.Repeat("!", 30), "after"},
		{"another conversation's", "after=" + next2, "after"},
		{"another conversation's prev", "before=" + prev2, "before"},
		{"another user's", "after=" + next3, "after"},
		{"a prev cursor as after", "after=" + prev, "after"},
		{"a next cursor as before", "before=" + next, "before"},
		{"limit 0", "limit=0", "limit"},
		{"limit 501", "limit=501", "limit"},
		{"limit not a number", "limit=many", "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, p := e.api("GET", base+"?"+c.query, lc.agent, nil)
			if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %v, want 422 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), p)
			}
			named := false
			for _, fe := range p["errors"].([]any) {
				named = named || fe.(map[string]any)["field"] == c.field
			}
			if !named {
				t.Fatalf("errors %v do not name %s", p["errors"], c.field)
			}
		})
	}
	// The other user cannot read the conversation, cursor or not.
	if resp, _ := e.api("GET", base+"?after="+next, otherAgent, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another user with the owner's cursor: %d", resp.StatusCode)
	}

	// The page and its feed refuse them too, with a readable message.
	for _, path := range []string{lc.path + "?before=" + string(tampered), lc.path + "?after=" + next2, lc.path + "/transcript?after=" + prev,
		lc.path + "/transcript?before=" + next} {
		resp, body := lc.owner.get(path)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "cursor") {
			t.Fatalf("%s: %d\n%.1500s", path, resp.StatusCode, body)
		}
	}
}
