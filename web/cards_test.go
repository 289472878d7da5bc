package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Cards tell the truth: effect, risk, action class, the agent token by
// name, who decided and when, an edit as a diff, a link to the audit log;
// a call that cannot be undone needs the second confirmation on the page.
func TestCards_TellWhoWhatAndAskTwiceForWhatCannotBeUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	// records.delete is high risk: auto-approved here, so its card is the
	// owner's to confirm.
	e.pool.Exec(t.Context(), "UPDATE workspaces SET auto_approve_high_risk = true")

	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Clients"})
	base := "/api/v1/conversations/" + conv["id"].(string)
	resp, put := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold"}}, "rationale": "the user said Acme is gold"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("put: %d %v", resp.StatusCode, put)
	}
	resp, del := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.delete",
		"arguments": map[string]any{"collection": "clients", "key": "acme"}, "rationale": "clean up an old client", "idempotency_key": "delete-old-client-001"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %d %v", resp.StatusCode, del)
	}
	putID, delID := put["proposal_id"].(string), del["proposal_id"].(string)

	resp, page := owner.get("/conversations/" + conv["id"].(string))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	delCard := cardHTML(t, page, delID)
	putCard := cardHTML(t, page, putID)
	for _, want := range []string{"agent token “test agent”", `data-effect="destructive"`, "destroys data", `data-risk="high"`, "high risk",
		`data-testid="action-class"`, "tool.call.local", "waiting for you", `href="/audit?object=` + delID + `"`, `data-irreversible="records.delete destroys data`, "<time datetime="} {
		if !strings.Contains(delCard, want) {
			t.Errorf("delete card lacks %q:\n%s", want, delCard)
		}
	}
	if strings.Contains(delCard, ">pending<") || strings.Contains(page, "pending_approval<") {
		t.Errorf("a raw status shows:\n%s", delCard)
	}
	if strings.Contains(putCard, "data-irreversible") || !strings.Contains(putCard, "changes data") {
		t.Errorf("put card:\n%s", putCard)
	}

	// Edit & approve the put: the card shows what changed against the
	// agent's proposal.
	resp, frag := owner.postForm("/proposals/"+putID+"/apply", url.Values{"arg.collection": {"clients"}, "arg.key": {"acme"}, "arg.value": {`{"tier": "silver"}`}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `data-testid="arg-diff"`) || !strings.Contains(frag, `data-key="value"`) ||
		!strings.Contains(frag, `<del>{&#34;tier&#34;:&#34;gold&#34;}</del>`) || !strings.Contains(frag, `<ins>{&#34;tier&#34;:&#34;silver&#34;}</ins>`) {
		t.Fatalf("edited card: %d\n%s", resp.StatusCode, frag)
	}
	if strings.Contains(frag, `data-key="key"`) {
		t.Fatalf("an unchanged argument shows as changed:\n%s", frag)
	}
	// Approve the delete without the second confirmation: refused next to
	// the button, nothing ran.
	resp, frag = owner.postForm("/proposals/"+delID+"/apply", nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "cannot be restored") || !strings.Contains(frag, "nothing ran") ||
		!strings.Contains(frag, `data-testid="card-error"`) {
		t.Fatalf("apply without ack: %d\n%s", resp.StatusCode, frag)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+delID, agent, nil); p["status"] != "pending" {
		t.Fatalf("after a refused apply the delete is %v", p["status"])
	}
	// Confirmed: it runs, and the card says who approved it and when.
	resp, frag = owner.postForm("/proposals/"+delID+"/apply", url.Values{"irreversible_ack": {"1"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `data-status="applied"`) {
		t.Fatalf("apply with ack: %d\n%s", resp.StatusCode, frag)
	}
	if !strings.Contains(frag, "Approved") || !strings.Contains(frag, "by <strong>owner@example.com</strong>") || strings.Count(frag, "<time datetime=") < 2 {
		t.Fatalf("decided line:\n%s", frag)
	}

	// A call made with a user token is the person's own.
	mine := e.token("owner@example.com", auth.TokenUser)
	_, own := e.api("POST", base+"/tool-calls", mine, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "own", "value": map[string]any{"by": "me"}}, "rationale": "my own note on the client"})
	if _, page := owner.get("/conversations/" + conv["id"].(string)); !strings.Contains(cardHTML(t, page, own["proposal_id"].(string)), "owner@example.com (token “test user”)") {
		t.Fatalf("the user token's card:\n%s", cardHTML(t, page, own["proposal_id"].(string)))
	}
	// The REST API does not ask twice (the record is gone, so it runs and
	// fails, but it runs).
	e.pool.Exec(t.Context(), "DELETE FROM rate_counters") // a second delete: more than the irreversible class's one a minute
	resp, del2 := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.delete",
		"arguments": map[string]any{"collection": "clients", "key": "acme"}, "rationale": "clean up an older client", "idempotency_key": "delete-older-client-01"})
	user := e.token("owner@example.com", auth.TokenUser)
	if resp, p := e.api("POST", "/api/v1/proposals/"+del2["proposal_id"].(string)+"/apply", user, map[string]any{}); resp.StatusCode != http.StatusOK || p["status"] == "pending" {
		t.Fatalf("API apply: %d %v", resp.StatusCode, p)
	}
}

// cardHTML is one proposal card's markup in a page.
func cardHTML(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="proposal-`+id+`"`)
	if i < 0 {
		t.Fatalf("no card %s in the page", id)
	}
	j := strings.Index(page[i:], "</article>")
	if j < 0 {
		t.Fatalf("card %s does not end", id)
	}
	return page[i : i+j]
}

// An address that leads nowhere keeps the navigation for a signed-in
// person; the API keeps problem+json; /favicon.ico is answered.
func TestNotFoundPageAndFavicon(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	resp, body := owner.get("/no/such/page")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "Page not found") || !strings.Contains(body, `aria-label="Main"`) ||
		!strings.Contains(body, "owner@example.com") || !strings.Contains(body, `name="_csrf"`) {
		t.Fatalf("signed-in 404: %d\n%s", resp.StatusCode, body)
	}
	resp, body = e.client().get("/no/such/page")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "Page not found") || strings.Contains(body, `aria-label="Main"`) {
		t.Fatalf("signed-out 404: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = owner.get("/api/v1/no-such-thing")
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		t.Fatalf("API 404: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp, body = e.client().get("/favicon.ico")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(body, "<svg") {
		t.Fatalf("favicon: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// The "add a cell" picker starts on a read tool; in an autonomous notebook,
// where a new cell runs at once, a tool that cannot be undone asks a
// second time (the marker app.js reads, and the handler's refusal).
func TestAddCell_ReadToolByDefaultAndAutonomousDeleteAsksTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	path := newNotebook(t, owner)
	_, page := owner.get(path)
	sel := regexp.MustCompile(`<option value="([^"]+)" selected>[^<]*\(([a-z]+)\)</option>`).FindStringSubmatch(page)
	if sel == nil || sel[2] != "read" {
		t.Fatalf("the picker starts on %v, want a read tool", sel)
	}
	if _, frag := owner.get(path + "/cell-fields?tool=records.delete"); strings.Contains(frag, "data-irreversible") {
		t.Fatalf("a cautious notebook asks twice on adding a delete (its Run asks):\n%s", frag)
	}
	if resp, _ := owner.postForm(path+"/trust", url.Values{"trust_level": {"autonomous"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("trust: %d", resp.StatusCode)
	}
	if _, frag := owner.get(path + "/cell-fields?tool=records.delete"); !strings.Contains(frag, `data-irreversible="This notebook is autonomous`) {
		t.Fatalf("the autonomous delete is not marked:\n%s", frag)
	}
	cell := url.Values{"tool": {"records.delete"}, "arg.collection": {"c"}, "arg.key": {"gone"}, "rationale": {"remove the stale record"},
		"idempotency_key": {"add-cell-delete-000001"}}
	resp, frag := owner.postForm(path+"/cells", cell)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "confirm it a second time") || !strings.Contains(frag, `value="gone"`) {
		t.Fatalf("add without ack: %d\n%s", resp.StatusCode, frag)
	}
	if _, cells := owner.get(path + "/cells?after=0"); strings.Contains(cells, "proposal-card") {
		t.Fatalf("a refused cell was added:\n%s", cells)
	}
	cell.Set("irreversible_ack", "1")
	if resp, frag := owner.postForm(path+"/cells", cell); resp.StatusCode != http.StatusOK {
		t.Fatalf("add with ack: %d\n%s", resp.StatusCode, frag)
	}
	if _, cells := owner.get(path + "/cells?after=0"); !strings.Contains(cells, `data-tool="records.delete"`) {
		t.Fatalf("the confirmed cell is missing:\n%s", cells)
	}
}
