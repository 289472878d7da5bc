package web_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// waitFolded waits until the server's roll-up has folded every evidence
// and audit row.
func (e *env) waitFolded() {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var behind bool
		if err := e.pool.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT 1 FROM rollup_feeds f WHERE f.feed = 'evidence' AND f.folded_to < (SELECT coalesce(max(id), 0) FROM evidence))
			    OR EXISTS (SELECT 1 FROM rollup_feeds f WHERE f.feed = 'audit_events' AND f.folded_to < (SELECT coalesce(max(id), 0) FROM audit_events))`).
			Scan(&behind); err != nil {
			e.t.Fatal(err)
		}
		if !behind {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatal("the roll-up did not fold the rows within 20 s")
}

// /trust, the posteriors and /admin/intent say the same thing right after
// the calls (read from the rows the roll-up has not folded yet) and once
// the server's roll-up has folded them.
func TestRollUp_PagesReadTheSameBeforeAndAfterItFolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	user := e.token("admin@example.com", auth.TokenUser)
	agent := e.token("admin@example.com", auth.TokenAgent)
	for _, l := range []string{"approved", "approved", "minor_edit", "rejected"} {
		e.api("POST", "/api/v1/evidence", user, map[string]any{"action_class": "tool.call.local", "label": l})
	}
	rejected, confirmed := e.pendingCall(agent), e.pendingCall(agent)
	if resp, _ := e.api("POST", "/api/v1/proposals/"+rejected+"/reject", user, map[string]any{"reason": "not now"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("reject: %d", resp.StatusCode)
	}
	if resp, _ := e.api("POST", "/api/v1/proposals/"+confirmed+"/apply", user, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %d", resp.StatusCode)
	}
	e.pendingCall(agent) // still waiting

	read := func() (map[string]any, map[string]any, string) {
		_, classes := e.api("GET", "/api/v1/action-classes", user, nil)
		_, intent := e.api("GET", "/admin/intent", user, nil)
		delete(intent, "since")
		delete(intent, "until")
		_, page := admin.get("/trust")
		return classes, intent, page
	}
	classes, intent, page := read()
	if intent["total"] != float64(3) {
		t.Fatalf("intent before folding: %v", intent)
	}
	for _, want := range []string{"2 decided by a person", "67 % (4 of 6 judgments"} {
		if !strings.Contains(page, want) {
			t.Errorf("/trust before folding lacks %q", want)
		}
	}
	e.waitFolded()
	classes2, intent2, page2 := read()
	if !reflect.DeepEqual(classes, classes2) {
		t.Errorf("posteriors changed when folded:\n%v\n%v", classes, classes2)
	}
	if !reflect.DeepEqual(intent, intent2) {
		t.Errorf("intent changed when folded:\n%v\n%v", intent, intent2)
	}
	for _, want := range []string{"2 decided by a person", "67 % (4 of 6 judgments"} {
		if !strings.Contains(page2, want) {
			t.Errorf("/trust after folding lacks %q", want)
		}
	}
}

// An idle server writes nothing: every background turn (each roll-up feed
// every 250 ms, the sequencer, the notifications) finds nothing to fold
// and takes no row lock, so no WAL record and no transaction id (about
// 30 a second per instance when each turn locked its feed's row). A row
// lock leaves the locker's transaction id in the row's xmax; a fold
// replaces the row, whose new version has none.
func TestRollUp_AnIdleServerLocksNoFeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.waitFolded()
	time.Sleep(time.Second) // several idle turns of every feed
	rows, err := e.pool.Query(context.Background(), `SELECT feed || ' by ' || xmax::text FROM rollup_feeds WHERE xmax <> '0' ORDER BY feed`)
	if err != nil {
		t.Fatal(err)
	}
	var locked []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		locked = append(locked, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(locked) > 0 {
		t.Errorf("idle turns locked feeds: %v", locked)
	}
}
