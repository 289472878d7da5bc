package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The authority classes' default limits per agent hold through the real
// server for the classes that run at once: 120 reads and 60 idempotent
// writes a minute (the four authority classes), counted in memory with
// group commit on, shared through the database off the call path. The
// next call is 429 with Retry-After; another token has its own count.
func TestRateLimit_ClassDefaultsForReadsAndIdempotentWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	other, user := e.token("owner@example.com", auth.TokenAgent), e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	e.api("PATCH", "/api/v1/conversations/"+conv["id"].(string), user, map[string]any{"permission_mode": "auto"})
	path := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	get := map[string]any{"tool": "records.get", "arguments": map[string]any{"collection": "c", "key": "k"}, "rationale": "read the record we need"}
	put := map[string]any{"tool": "records.put", "arguments": map[string]any{"collection": "c", "key": "k", "value": map[string]any{"n": 1}},
		"rationale": "store the value we computed"}

	// Fixed windows: a run that crosses a minute's end starts over (the
	// count restarts there), at most twice.
	for attempt := 0; ; attempt++ {
		minute := time.Now().Truncate(time.Minute)
		for _, c := range []struct {
			call  map[string]any
			limit int
		}{{get, 120}, {put, 60}} {
			for i := range c.limit {
				if resp, p := e.api("POST", path, agent, c.call); resp.StatusCode != http.StatusOK && time.Now().Truncate(time.Minute).Equal(minute) {
					t.Fatalf("%s call %d of %d: %d %v", c.call["tool"], i+1, c.limit, resp.StatusCode, p)
				}
			}
		}
		var over [2]*http.Response
		var problems [2]map[string]any
		over[0], problems[0] = e.api("POST", path, agent, get)
		over[1], problems[1] = e.api("POST", path, agent, put)
		if !time.Now().Truncate(time.Minute).Equal(minute) {
			if attempt == 2 {
				t.Fatal("three runs crossed a minute's end")
			}
			time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)))
			continue
		}
		for i, resp := range over {
			if resp.StatusCode != http.StatusTooManyRequests || problems[i]["code"] != "rate_limited" || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("over the limit: %d %v %v", resp.StatusCode, resp.Header, problems[i])
			}
		}
		break
	}
	if resp, p := e.api("POST", path, other, get); resp.StatusCode != http.StatusOK {
		t.Fatalf("another token: %d %v", resp.StatusCode, p)
	}
	// The instance tells the database what it counted, off the call path:
	// a call at least a second after the last sync sets one off.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		e.pool.QueryRow(t.Context(), "SELECT coalesce(max(count), 0) FROM rate_counters WHERE bucket LIKE 'agent:token:%:records.get'").Scan(&n)
		if n >= 120 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shared count of records.get is %d after 10 s, want at least 120", n)
		}
		time.Sleep(300 * time.Millisecond)
		e.api("POST", path, agent, get)
	}
}
