package web_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The conversations list comes a page at a time, most recently active
// first, through the API (limit, next) and the page (Older
// conversations): every conversation once, none of another user's; a
// call moves its conversation to the top at once; a limit or cursor the
// list cannot read is a 422 naming it.
func TestConversationsList_PagesThroughAPIAndPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	browser := e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	other := e.token("other@example.com", auth.TokenAgent)
	var ids []string
	for i := range 5 {
		resp, c := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": fmt.Sprintf("c%d", i)})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %v", resp.StatusCode, c)
		}
		ids = append(ids, c["id"].(string))
	}
	e.api("POST", "/api/v1/conversations", other, map[string]any{"title": "someone else's"})
	// A read in the first conversation makes it the most recently active.
	if resp, r := e.api("POST", "/api/v1/conversations/"+ids[0]+"/tool-calls", agent, map[string]any{
		"tool": "records.search", "arguments": map[string]any{"query": "x"}, "rationale": "look before writing anything"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %d %v", resp.StatusCode, r)
	}
	want := []string{ids[0], ids[4], ids[3], ids[2], ids[1]}

	var got []string
	var next string
	first := true
	for pages := 0; first || next != ""; pages++ {
		first = false
		path := "/api/v1/conversations?limit=2"
		if next != "" {
			path += "&before=" + next
		}
		resp, page := e.api("GET", path, agent, nil)
		if resp.StatusCode != http.StatusOK || pages > 3 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, page)
		}
		for _, c := range page["conversations"].([]any) {
			got = append(got, c.(map[string]any)["id"].(string))
		}
		next, _ = page["next"].(string)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("pages: %v, want %v", got, want)
	}

	_, page := e.api("GET", "/api/v1/conversations?limit=2", agent, nil)
	cursor := page["next"].(string)
	for name, c := range map[string]struct{ path, token, field string }{
		"limit 0":          {"/api/v1/conversations?limit=0", agent, "limit"},
		"limit 201":        {"/api/v1/conversations?limit=201", agent, "limit"},
		"limit words":      {"/api/v1/conversations?limit=many", agent, "limit"},
		"not a cursor":     {"/api/v1/conversations?before=yesterday", agent, "before"},
		"another's cursor": {"/api/v1/conversations?before=" + cursor, other, "before"},
	} {
		resp, p := e.api("GET", c.path, c.token, nil)
		if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(fmt.Sprint(p["errors"]), "field:"+c.field) {
			t.Errorf("%s: %d %v, want 422 naming %s", name, resp.StatusCode, p, c.field)
		}
	}

	// The page: the newest 50, and a link to the next page.
	for i := range 50 {
		e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": fmt.Sprintf("more %d", i)})
	}
	_, html := browser.get("/conversations")
	older := regexp.MustCompile(`href="/conversations\?before=([A-Za-z0-9_-]+)" data-testid="conversations-older"`).FindStringSubmatch(html)
	if older == nil || strings.Count(html, `href="/conversations/`) != 50 || strings.Contains(html, "someone else") {
		t.Fatalf("first page: %d conversations, older link %v", strings.Count(html, `href="/conversations/`), older)
	}
	_, html = browser.get("/conversations?before=" + older[1])
	if n := strings.Count(html, `href="/conversations/`); n != 5 || strings.Contains(html, `data-testid="conversations-older"`) ||
		!strings.Contains(html, `data-testid="conversations-newest"`) || !strings.Contains(html, ">c0<") {
		t.Errorf("second page: %d conversations (want the 5 oldest, c0 among them), no older link, a link back", n)
	}
	if resp, html := browser.get("/conversations?before=nonsense"); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(html, "cannot be read") {
		t.Errorf("a bad cursor on the page: %d", resp.StatusCode)
	}
}
