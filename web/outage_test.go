package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/web"
)

// outageEnv is a server whose pool reaches its database through a proxy
// that can fail like an outage; direct reaches the same database around
// the proxy, to see what was really recorded.
type outageEnv struct {
	*env
	proxy  *dbtest.Proxy
	direct *pgxpool.Pool
	// internal collects what the server logged as internal errors, and
	// unavailable the errors it answered 503 by request id.
	mu          sync.Mutex
	internal    []string
	unavailable map[string]string
}

func newOutageEnv(t *testing.T, lease time.Duration) *outageEnv {
	t.Helper()
	dbURL := dbtest.MustURL(t)
	proxy := dbtest.MustProxy(t, dbURL)
	direct, err := db.NewPool(context.Background(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	// Enough connections for group commit to share transactions.
	pool, err := db.NewPool(context.Background(), proxy.URL, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	registry := liftedRegistry(t) // calls from one token far above records.put's default limit
	o := &outageEnv{proxy: proxy, direct: direct, unavailable: map[string]string{}}
	log := slog.New(recordErrors{o})
	svc := web.NewServices(pool, log, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, registry)
	svc.Proposals.SetIdempotencyWait(100 * time.Millisecond)
	svc.Proposals.SetIdempotencyLease(lease)
	ws, err := svc.Auth.EnsureDefaultWorkspace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Config{CookieSecure: true, ReceiptKey: testReceiptKey}, log, pool, svc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	o.env = &env{t: t, url: hs.URL, pool: pool, auth: svc.Auth, ws: ws.String(), srv: srv}
	return o
}

// recordErrors keeps the server's "request failed" log lines (the
// internal errors a 500 answers).
type recordErrors struct{ o *outageEnv }

func (h recordErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h recordErrors) Handle(_ context.Context, r slog.Record) error {
	line, id, cause := r.Message, "", ""
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		switch a.Key {
		case "request_id":
			id = a.Value.String()
		case "err":
			cause = a.Value.String()
		}
		return true
	})
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	switch r.Message {
	case "request failed":
		h.o.internal = append(h.o.internal, line)
	case "database unavailable":
		h.o.unavailable[id] = cause
	}
	return nil
}

// cause is the error the server answered request id with a 503.
func (o *outageEnv) cause(id any) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unavailable[fmt.Sprint(id)]
}
func (h recordErrors) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordErrors) WithGroup(string) slog.Handler      { return h }

// autoConversation is a conversation in auto mode and its owner's agent
// token.
func (o *outageEnv) autoConversation() (base, agent string) {
	o.user("owner@example.com", auth.RoleMember)
	agent = o.token("owner@example.com", auth.TokenAgent)
	user := o.token("owner@example.com", auth.TokenUser)
	_, conv := o.api("POST", "/api/v1/conversations", agent, map[string]any{})
	base = "/api/v1/conversations/" + conv["id"].(string)
	if resp, p := o.api("PATCH", base, user, map[string]any{"permission_mode": "auto"}); resp.StatusCode != http.StatusOK {
		o.t.Fatalf("auto mode: %d %v", resp.StatusCode, p)
	}
	return base, agent
}

// putCall is the body of a records.put of the record key.
func putCall(key string) []byte {
	return fmt.Appendf(nil, `{"tool": "records.put", "arguments": {"collection": "outage", "key": %q, "value": {"n": 1}}, "rationale": "keep the record the user gave"}`, key)
}

// answer is one response to a call.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	problem map[string]any
	err     error
}

// post sends a call (with an idempotency key unless key is ""), safe to
// use from many goroutines; the response is checked against openapi.yaml.
func (o *outageEnv) post(ctx context.Context, path, token, key string, body []byte) answer {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, o.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return answer{err: err}
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: buf.Bytes()}
	checkAgainstSpec(o.t, req, body, resp, a.body)
	json.Unmarshal(a.body, &a.problem)
	return a
}

// isUnavailable reports what is wrong with a as a 503 of an outage ("" if
// nothing).
func isUnavailable(a answer) string {
	switch {
	case a.status != http.StatusServiceUnavailable:
		return "not 503"
	case a.header.Get("Retry-After") == "":
		return "no Retry-After"
	case a.header.Get("Content-Type") != "application/problem+json":
		return "not problem+json"
	case a.problem["code"] != "unavailable" || a.problem["type"] != "urn:gatehouse:problem:unavailable":
		return "not the unavailable problem"
	case a.problem["outcome_unknown"] == true && !strings.Contains(fmt.Sprint(a.problem["detail"]), "may have been recorded"):
		return "an unknown outcome whose detail does not say so"
	}
	return ""
}

func TestOutage_CallsAnswer503NotInternalError(t *testing.T) {
	t.Parallel()
	o := newOutageEnv(t, time.Minute)
	base, agent := o.autoConversation()

	// Clients call until the outages are over: half with an idempotency
	// key (the path of a call alone that links its key), half without
	// (group commit, or a call alone whose record travels with its COMMIT).
	// A client stops between calls: none is cut off by the test.
	stopped := make(chan struct{})
	type sent struct {
		key string
		a   answer
	}
	var (
		mu  sync.Mutex
		all []sent
		wg  sync.WaitGroup
	)
	const clients = 16
	for c := range clients {
		wg.Go(func() {
			for i := range 400 {
				select {
				case <-stopped:
					return
				default:
				}
				key := fmt.Sprintf("c%02d-%04d", c, i)
				idem := ""
				if i%2 == 1 {
					idem = "outage-key-" + key
				}
				a := o.post(t.Context(), base+"/tool-calls", agent, idem, putCall(key))
				mu.Lock()
				all = append(all, sent{key, a})
				mu.Unlock()
			}
		})
	}
	// The outages: connections closed (EOF), reset (ECONNRESET), and a
	// database that refuses connections for a moment, twice each.
	for round := range 6 {
		time.Sleep(300 * time.Millisecond)
		switch round % 3 {
		case 0:
			o.proxy.Cut(false)
		case 1:
			o.proxy.Cut(true)
		case 2:
			o.proxy.Down(150*time.Millisecond, false)
		}
	}
	time.Sleep(500 * time.Millisecond) // and calls after the last one
	close(stopped)
	wg.Wait()

	// What was really recorded: the records by key, the proposals by id.
	recorded, proposed := map[string]bool{}, map[string]bool{}
	rows, err := o.direct.Query(context.Background(), `SELECT 'record', key FROM records WHERE collection = 'outage'
		UNION ALL SELECT 'proposal', id::text FROM proposals`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var kind, k string
		rows.Scan(&kind, &k)
		if kind == "record" {
			recorded[k] = true
		} else {
			proposed[k] = true
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	var ok, unavailable, unknown, unknownRecorded int
	for _, s := range all {
		a := s.a
		switch {
		case a.err != nil:
			t.Errorf("call %s: %v", s.key, a.err)
		case a.status == http.StatusOK:
			ok++
			// The database going away is not the tool failing.
			if !recorded[s.key] || a.problem["status"] != "applied" {
				t.Errorf("call %s answered 200 but its record is not there: %s", s.key, a.body)
			}
		case isUnavailable(a) != "":
			t.Errorf("call %s: %d (%s), want 200 or 503 with Retry-After and problem+json: %s", s.key, a.status, isUnavailable(a), a.body)
		case a.problem["outcome_unknown"] == true:
			unknown++
			if recorded[s.key] {
				unknownRecorded++
			}
			// Every automatic call knows the proposal it was recording,
			// and the proposal is there exactly when the call's effect is.
			id, _ := a.problem["proposal_id"].(string)
			if id == "" || proposed[id] != recorded[s.key] {
				t.Errorf("call %s: outcome unknown, proposal %q (recorded: %v, record there: %v): %s", s.key, id, proposed[id], recorded[s.key], a.body)
			}
		default:
			unavailable++
			// A plain 503 means that nothing was done.
			if recorded[s.key] {
				t.Errorf("call %s answered 503 without outcome_unknown, but it was recorded: %s (%s)", s.key, a.body, o.cause(a.problem["request_id"]))
			}
		}
	}
	o.mu.Lock()
	for _, line := range o.internal {
		t.Errorf("logged as an internal error: %s", line)
	}
	o.mu.Unlock()
	t.Logf("%d calls: %d answered 200, %d 503 (nothing done), %d 503 with outcome_unknown (%d of them recorded)",
		len(all), ok, unavailable, unknown, unknownRecorded)
	if ok == 0 || unavailable+unknown == 0 {
		t.Errorf("the outages were not exercised: %d answered 200, %d 503", ok, unavailable+unknown)
	}
}

func TestOutage_ACallWhoseCommitWasLostSaysSoAndARetryGetsItsRealOutcome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		key       string
		delivered bool
	}{
		{"with a key, committed", "lost-commit-key-0001", true},
		{"with a key, not committed", "lost-commit-key-0002", false},
		{"without a key, committed", "", true},
		{"without a key, not committed", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const lease = time.Second
			o := newOutageEnv(t, lease)
			base, agent := o.autoConversation()
			body := putCall("lost")

			// Cut at the COMMIT of the call's transaction (the one that
			// sends its record's key), not another one of the server's.
			fired := o.proxy.CutAtCommit(`"lost"`, c.delivered)
			a := o.post(t.Context(), base+"/tool-calls", agent, c.key, body)
			select {
			case <-fired:
			case <-time.After(5 * time.Second):
				t.Fatal("no COMMIT went through the proxy")
			}
			id, _ := a.problem["proposal_id"].(string)
			if why := isUnavailable(a); why != "" || a.problem["outcome_unknown"] != true || id == "" {
				t.Fatalf("a call whose COMMIT's answer was lost: %d (%s), want 503 with outcome_unknown and proposal_id: %s", a.status, why, a.body)
			}

			// The proposal it names is there if the COMMIT ran, not found if not.
			resp, p := o.api("GET", "/api/v1/proposals/"+id, agent, nil)
			switch {
			case c.delivered && (resp.StatusCode != http.StatusOK || p["status"] != "applied"):
				t.Fatalf("the committed proposal: %d %v", resp.StatusCode, p)
			case !c.delivered && resp.StatusCode != http.StatusNotFound:
				t.Fatalf("the proposal that was not committed: %d %v", resp.StatusCode, p)
			}
			if c.key == "" {
				return
			}

			// A retry with the key: "in progress" until the lost request's
			// lease ends, then the call's real state (never a second run).
			deadline := time.Now().Add(5 * lease)
			for {
				a = o.post(t.Context(), base+"/tool-calls", agent, c.key, body)
				if a.status != http.StatusConflict {
					break
				}
				if a.header.Get("Retry-After") == "" || time.Now().After(deadline) {
					t.Fatalf("retry: %d %s", a.status, a.body)
				}
				time.Sleep(100 * time.Millisecond)
			}
			replayed := a.header.Get("Idempotent-Replayed") == "true"
			switch {
			case a.status != http.StatusOK || a.problem["status"] != "applied":
				t.Fatalf("retry: %d %s", a.status, a.body)
			case c.delivered && (!replayed || a.problem["proposal_id"] != id):
				t.Fatalf("retry of the committed call: not its state (replayed %v): %s", replayed, a.body)
			case !c.delivered && (replayed || a.problem["proposal_id"] == id):
				t.Fatalf("retry of the call that was not committed: did not run it (replayed %v): %s", replayed, a.body)
			}
			var proposals, records int
			o.direct.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM proposals), (SELECT count(*) FROM records WHERE collection = 'outage')`).Scan(&proposals, &records)
			if proposals != 1 || records != 1 {
				t.Fatalf("%d proposals and %d records, want the call once", proposals, records)
			}
		})
	}
}
