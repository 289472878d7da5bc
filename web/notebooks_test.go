package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

func TestAPI_NotebookCellsFollowTheTrustLevel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	other := e.token("other@example.com", auth.TokenUser)

	resp, nb := e.api("POST", "/api/v1/notebooks", agent, map[string]any{"title": "Cleanup"})
	if resp.StatusCode != http.StatusCreated || nb["trust_level"] != "cautious" {
		t.Fatalf("create: %d %v", resp.StatusCode, nb)
	}
	base := "/api/v1/notebooks/" + nb["id"].(string)
	put := func(key string) map[string]any {
		return map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": key, "value": map[string]any{"k": key}},
			"rationale": "keep the record up to date"}
	}
	del := map[string]any{"tool": "records.delete", "arguments": map[string]any{"collection": "c", "key": "a"}, "rationale": "remove the stale record",
		"idempotency_key": "delete-a-00000000001"}

	// Cautious: a change asks.
	resp, p := e.api("POST", base+"/tool-calls", agent, put("a"))
	if resp.StatusCode != http.StatusAccepted || p["disposition"] != "confirm" || p["trust_level"] != "cautious" ||
		p["notebook_id"] != nb["id"] || !strings.HasPrefix(p["confirm_url"].(string), "/notebooks/"+nb["id"].(string)+"#proposal-") {
		t.Fatalf("cautious put: %d %v", resp.StatusCode, p)
	}
	// The agent cannot raise its own trust; nothing changes.
	if resp, p := e.api("PATCH", base, agent, map[string]any{"trust_level": "autonomous"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("agent PATCH: %d %v", resp.StatusCode, p)
	}
	if _, got := e.api("GET", base, agent, nil); got["trust_level"] != "cautious" {
		t.Fatalf("after the agent's PATCH: %v", got)
	}
	// Another member does not see it.
	if resp, _ := e.api("GET", base, other, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("other GET: %d", resp.StatusCode)
	}
	if resp, _ := e.api("PATCH", base, other, map[string]any{"trust_level": "autonomous"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("other PATCH: %d", resp.StatusCode)
	}
	// Trusted: a change runs, a delete still asks.
	if resp, p := e.api("PATCH", base, user, map[string]any{"trust_level": "trusted"}); resp.StatusCode != http.StatusOK || p["trust_level"] != "trusted" {
		t.Fatalf("owner PATCH: %d %v", resp.StatusCode, p)
	}
	resp, p = e.api("POST", base+"/tool-calls", agent, put("b"))
	if resp.StatusCode != http.StatusOK || p["disposition"] != "auto" || p["status"] != "applied" || p["apply_path"] != "auto" {
		t.Fatalf("trusted put: %d %v", resp.StatusCode, p)
	}
	resp, p = e.api("POST", base+"/tool-calls", agent, del)
	if resp.StatusCode != http.StatusAccepted || p["disposition"] != "confirm" {
		t.Fatalf("trusted delete: %d %v", resp.StatusCode, p)
	}
	// Autonomous: every cell runs as far as the notebook goes, but a
	// delete is high risk (ADR-036), so it still waits for an approver.
	e.api("PATCH", base, user, map[string]any{"trust_level": "autonomous"})
	e.pool.Exec(t.Context(), "DELETE FROM rate_counters") // a second delete: more than the irreversible class's one a minute
	resp, p = e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.delete",
		"arguments": map[string]any{"collection": "c", "key": "b"}, "rationale": "remove the stale record", "idempotency_key": "delete-b-00000000001"})
	if resp.StatusCode != http.StatusAccepted || p["disposition"] != "auto" || p["status"] != "pending_approval" || p["requires_human_approval"] != true {
		t.Fatalf("autonomous delete: %d %v", resp.StatusCode, p)
	}
	// The cells, in order.
	resp, cells := e.api("GET", base+"/cells", agent, nil)
	list, _ := cells["cells"].([]any)
	if resp.StatusCode != http.StatusOK || len(list) != 4 {
		t.Fatalf("cells: %d %v", resp.StatusCode, cells)
	}
	wantTools := []string{"records.put", "records.put", "records.delete", "records.delete"}
	for i, c := range list {
		if got := c.(map[string]any)["tool"]; got != wantTools[i] {
			t.Errorf("cell %d is %v, want %s", i, got, wantTools[i])
		}
	}
	// Bad input: a clear 422 naming the field.
	if resp, p := e.api("PATCH", base, user, map[string]any{"trust_level": "Autonomous"}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad trust: %d %v", resp.StatusCode, p)
	}
	if resp, p := e.api("POST", base+"/tool-calls", agent, map[string]any{"tool": "records.put", "arguments": map[string]any{}, "rationale": "short"}); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad call: %d %v", resp.StatusCode, p)
	}
	if resp, _ := e.api("POST", "/api/v1/notebooks/nope/tool-calls", agent, put("z")); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown notebook: %d", resp.StatusCode)
	}
}

var notebookLocation = regexp.MustCompile(`^/notebooks/([0-9a-f-]{36})$`)

// newNotebook creates a notebook from the page and returns its path.
func newNotebook(t *testing.T, c *client) string {
	t.Helper()
	c.get("/notebooks")
	resp, _ := c.postForm("/notebooks", url.Values{"title": {"Bench"}})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !notebookLocation.MatchString(loc) {
		t.Fatalf("create: %d %q", resp.StatusCode, loc)
	}
	return loc
}

func TestNotebookPage_TrustSelectorPersistsAndExplainsEachLevel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	other := e.user("other@example.com", auth.RoleMember)
	path := newNotebook(t, owner)

	resp, body := owner.get(path)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("page: %d", resp.StatusCode)
	}
	for _, s := range []string{
		`value="cautious" checked`, "Mutating and destructive tools ask before they run.",
		"Mutating tools run; destructive tools ask.", "Every tool runs without asking you, destructive ones too.",
		"Whatever the level, a stricter layer can still hold a call",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	// A plain form (a graduation hint's button) comes back to the page; the
	// selector itself posts with htmx and gets its fragment.
	resp, frag := owner.postForm(path+"/trust", url.Values{"trust_level": {"trusted"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path {
		t.Fatalf("set trust: %d\n%s", resp.StatusCode, frag)
	}
	if _, body := owner.get(path); !strings.Contains(body, `value="trusted" checked`) {
		t.Fatal("the page does not show the stored level after a reload")
	}
	resp, frag = owner.postForm(path+"/trust", url.Values{"trust_level": {"reckless"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "cautious, trusted or autonomous") {
		t.Fatalf("bad level: %d\n%s", resp.StatusCode, frag)
	}
	if resp, _ := other.get(path); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another member sees the notebook: %d", resp.StatusCode)
	}
	other.get("/notebooks")
	if resp, _ := other.postForm(path+"/trust", url.Values{"trust_level": {"autonomous"}}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another member sets the level: %d", resp.StatusCode)
	}
	var changes int
	e.pool.QueryRow(t.Context(), "SELECT count(*) FROM audit_events WHERE action = 'notebook.trust_level_changed'").Scan(&changes)
	if changes != 1 {
		t.Fatalf("%d audited trust changes, want 1", changes)
	}
}

func TestNotebookPage_AddCellsFromTheFormRunAskAndDiscard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	path := newNotebook(t, owner)

	// The form is generated from the schema of the tool picked.
	resp, frag := owner.get(path + "/cell-fields?tool=records.put")
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `name="arg.collection"`) || !strings.Contains(frag, `name="arg.value"`) {
		t.Fatalf("fields: %d\n%s", resp.StatusCode, frag)
	}
	// A refused cell re-renders the form as typed, naming the fields.
	resp, frag = owner.postForm(path+"/cells", url.Values{"tool": {"records.put"}, "arg.collection": {"bad collection!"},
		"arg.value": {"{not json"}, "rationale": {"short"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "must be JSON (object)") || !strings.Contains(frag, `value="bad collection!"`) {
		t.Fatalf("bad cell: %d\n%s", resp.StatusCode, frag)
	}
	resp, frag = owner.postForm(path+"/cells", url.Values{"tool": {"records.put"}, "arg.collection": {"c"}, "arg.key": {"k"},
		"arg.value": {`{"v": 1}`}, "rationale": {"short"}})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "must have 10 to 500 characters") {
		t.Fatalf("short rationale: %d\n%s", resp.StatusCode, frag)
	}

	// Cautious: a safe cell runs, a mutating one asks.
	add := func(tool string, args url.Values) {
		t.Helper()
		args.Set("tool", tool)
		args.Set("rationale", "the owner tries this out")
		args.Set("idempotency_key", "form-"+strings.ReplaceAll(tool, ".", "_")+"-"+strconv.Itoa(len(args))+"-key0001")
		resp, frag := owner.postForm(path+"/cells", args)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("HX-Trigger") != "cells-changed" {
			t.Fatalf("add %s: %d\n%s", tool, resp.StatusCode, frag)
		}
	}
	add("records.put", url.Values{"arg.collection": {"c"}, "arg.key": {"k"}, "arg.value": {`{"v": 1}`}})
	add("records.search", url.Values{"arg.query": {"k"}})

	_, frag = owner.get(path + "/cells?after=0")
	cards := strings.Split(frag, `<article `)[1:]
	if len(cards) != 2 || !strings.Contains(cards[0], `data-status="pending"`) || !strings.Contains(cards[0], "Run this?") ||
		!strings.Contains(cards[1], `data-status="applied"`) || !strings.Contains(frag, `id="cell-count" class="live-state" name="after" value="2"`) {
		t.Fatalf("new cells after 0:\n%s", frag)
	}
	if _, frag := owner.get(path + "/cells?after=2"); strings.Contains(frag, "proposal-card") || !strings.Contains(frag, `name="after" value="2"`) {
		t.Fatalf("nothing new after 2:\n%s", frag)
	}
	if resp, _ := owner.get(path + "/cells?after=-1"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("after=-1: %d", resp.StatusCode)
	}

	// Edit & run, from the generated fields: the edited value runs.
	id := regexp.MustCompile(`id="proposal-([0-9a-f-]{36})"`).FindStringSubmatch(cards[0])[1]
	resp, frag = owner.postForm("/proposals/"+id+"/apply", url.Values{"arg.collection": {"c"}, "arg.key": {"k"}, "arg.value": {`{"v": 2}`}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `data-status="applied"`) {
		t.Fatalf("edit & run: %d\n%s", resp.StatusCode, frag)
	}
	add("records.get", url.Values{"arg.collection": {"c"}, "arg.key": {"k"}})
	_, frag = owner.get(path + "/cells?after=2")
	if !strings.Contains(html.UnescapeString(frag), `<dt>v</dt><dd><span class="value number">2</span>`) {
		t.Fatalf("the postflight does not show the edited value:\n%s", frag)
	}

	// Discard, without a reason: the agent reads a default one. (Not a
	// delete: high risk, it waits for an approver, not the owner.)
	add("notes.append", url.Values{"arg.collection": {"c"}, "arg.key": {"k"}, "arg.text": {"called back"}})
	_, frag = owner.get(path + "/cells?after=3")
	id = regexp.MustCompile(`id="proposal-([0-9a-f-]{36})"`).FindStringSubmatch(frag)[1]
	resp, frag = owner.postForm("/proposals/"+id+"/reject", url.Values{"discard": {"1"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, "Discarded: Discarded by the owner.") {
		t.Fatalf("discard: %d\n%s", resp.StatusCode, frag)
	}
	// A running cell shows progress without polling; the page's live feed
	// replaces it when its version changes.
	if _, err := e.pool.Exec(t.Context(), "UPDATE proposals SET status = 'applying' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	if _, frag := owner.get("/proposals/" + id + "/card"); strings.Contains(frag, "every ") || !strings.Contains(frag, "Running…") {
		t.Fatalf("a running cell does not show progress, or polls:\n%s", frag)
	}
	if _, frag := owner.get(path + "/cells?after=4&card=" + id + ":applying.1"); strings.Contains(frag, `id="cell-`+id) {
		t.Fatalf("an unchanged cell is sent again:\n%s", frag)
	}
	if _, frag := owner.get(path + "/cells?after=4&card=" + id + ":pending.1"); !strings.Contains(frag, `id="cell-`+id+`" class="cell" hx-swap-oob="true"`) {
		t.Fatalf("a changed cell is not replaced:\n%s", frag)
	}
}
