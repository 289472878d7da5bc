package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestConversationPage_OwnerWritesFromTheComposer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	other := e.user("other@example.com", auth.RoleMember)
	owner.get("/conversations")
	resp, _ := owner.postForm("/conversations", url.Values{"title": {"Plans"}})
	path := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(path, "/conversations/") {
		t.Fatalf("create: %d %q", resp.StatusCode, path)
	}
	_, page := owner.get(path)
	if !strings.Contains(page, `data-testid="composer"`) {
		t.Fatal("the page has no composer")
	}
	after := match(t, afterCursor, page, "live cursor")
	resp, frag := owner.postForm(path+"/messages", url.Values{"content": {"Renew Acme's plan, please."}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("HX-Trigger") != "transcript-changed" || !strings.Contains(frag, `data-testid="composer"`) {
		t.Fatalf("send: %d\n%s", resp.StatusCode, frag)
	}
	// The page's live feed asks for the lines after those it shows.
	_, frag = owner.get(path + "/transcript?after=" + after)
	if !strings.Contains(frag, `hx-swap-oob="beforeend:#transcript"`) || !strings.Contains(frag, "Renew Acme&#39;s plan, please.") {
		t.Fatalf("transcript after the empty page's cursor:\n%s", frag)
	}
	next := match(t, regexp.MustCompile(`id="transcript-after" class="live-state" name="after" value="([^"]*)" hx-swap-oob="true"`), frag, "new cursor")
	if _, frag := owner.get(path + "/transcript?after=" + next); strings.Contains(frag, "beforeend:#transcript") {
		t.Fatalf("nothing is new after the new cursor:\n%s", frag)
	}
	// The mode toggle is re-rendered only when the page shows another mode.
	if _, frag := owner.get(path + "/transcript?after=" + next + "&mode=approve"); strings.Contains(frag, "#mode-slot") {
		t.Fatalf("an unchanged mode is sent again:\n%s", frag)
	}
	if _, frag := owner.get(path + "/transcript?after=" + next + "&mode=auto"); !strings.Contains(frag, `hx-swap-oob="innerHTML:#mode-slot"`) || !strings.Contains(frag, `data-testid="mode-current">approve<`) {
		t.Fatalf("a mode changed elsewhere is not re-rendered:\n%s", frag)
	}
	if resp, _ := owner.get(path + "/transcript?after=x"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("after=x: %d", resp.StatusCode)
	}
	resp, frag = owner.postForm(path+"/messages", url.Values{"content": {"   "}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "1 to 20000 characters") {
		t.Fatalf("empty: %d\n%s", resp.StatusCode, frag)
	}
	other.get("/conversations")
	if resp, _ := other.postForm(path+"/messages", url.Values{"content": {"hi"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another member writes: %d", resp.StatusCode)
	}
	if _, page := owner.get(path); strings.Count(page, `class="line user"`) != 1 || !strings.Contains(page, "Renew Acme&#39;s plan, please.") {
		t.Fatal("the transcript does not show the one message after a reload")
	}
}
