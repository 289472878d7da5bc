//go:build soak

// The crash suite (`make soak`): a real `gatehouse serve` subprocess is
// SIGKILLed at a random moment while many clients call tools through it,
// restarted, and the database is compared with what the clients were told.
// Everything talks to 127.0.0.1 only, and every loop is bounded in count and
// time.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
)

const (
	// soakLease is the server's GATEHOUSE_IDEMPOTENCY_LEASE: how long a key
	// whose request died answers 409 before a retry gets the real state.
	soakLease = 2 * time.Second
	// soakRetryMargin is how much longer than the lease a retry may take,
	// from the restart, to get a definite answer.
	soakRetryMargin = 10 * time.Second

	soakNotes         = "soak-notes" // records the keyed calls append notes to
	soakPuts          = "soak-puts"  // one record per unkeyed records.put
	soakNoteRecords   = 32
	soakConversations = 16
	// soakCallsPerClient bounds each client's loop; the kill ends it first.
	soakCallsPerClient = 10000
	soakLoadBudget     = time.Minute
)

// soakInDatabaseTools are the tools whose effect lives in Gatehouse's own
// database: a crash must never leave one of their calls applying.
var soakInDatabaseTools = []string{"records.put", "records.get", "records.search", "notes.append", "records.delete", "records.bulk_delete"}

// TestSoak_KillDuringConcurrentApplies kills the server during
// SOAK_CONCURRENCY concurrent tool calls, SOAK_ROUNDS times, and checks
// after each round that no acknowledged effect is lost, nothing ran twice,
// no in-database call is left applying, and every keyed retry got a
// definite answer within the lease plus a margin.
func TestSoak_KillDuringConcurrentApplies(t *testing.T) {
	rounds := soakEnvInt(t, "SOAK_ROUNDS", 5)
	concurrency := soakEnvInt(t, "SOAK_CONCURRENCY", 200)
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, seed>>1))
	t.Logf("soak: %d rounds, %d concurrent clients, seed %d", rounds, concurrency, seed)

	s := newSoak(t, concurrency)
	reported := map[string]bool{}
	var totals soakTotals
	for round := 1; round <= rounds; round++ {
		killAfter := 50*time.Millisecond + time.Duration(rng.Int64N(int64(750*time.Millisecond)))
		st := s.round(round, concurrency, killAfter)
		totals.add(st)
		t.Log(st)
		findings, err := checkSoak(t.Context(), s.pool, s.calls)
		if err != nil {
			t.Fatalf("round %d: check: %v", round, err)
		}
		reportSoakFindings(t, round, findings, reported)
	}
	t.Logf("soak total: %s", totals)
	if findings, err := checkSoak(t.Context(), s.pool, s.calls); err == nil && len(findings) > 0 {
		t.Logf("soak findings at the end: %s", soakFindingCounts(findings))
	}
}

// TestSoak_CheckerDetectsALoss is the control: after a crash round it drops
// an acknowledged note, deletes an acknowledged record and runs another
// note a second time, and checkSoak — the checker the soak uses — must
// report each of them.
func TestSoak_CheckerDetectsALoss(t *testing.T) {
	concurrency := min(soakEnvInt(t, "SOAK_CONCURRENCY", 200), 40)
	s := newSoak(t, concurrency)
	t.Log(s.round(1, concurrency, 500*time.Millisecond))
	ctx := t.Context()
	before, err := checkSoak(ctx, s.pool, s.calls)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before the injected faults the checker reports %d findings (the crash's own, not this test's subject)", len(before))
	flagged := map[string]bool{}
	for _, f := range before {
		flagged[f.Subject] = true
	}
	var notes, puts []*soakCall
	for _, c := range s.calls {
		if !c.Acknowledged() || flagged[c.ID] {
			continue
		}
		if c.Keyed {
			notes = append(notes, c)
		} else {
			puts = append(puts, c)
		}
	}
	if len(notes) < 2 || len(puts) < 1 {
		t.Fatalf("the round acknowledged %d notes and %d records; the control needs 2 and 1", len(notes), len(puts))
	}
	dropped, doubled, deleted := notes[0], notes[1], puts[0]
	if _, err := s.pool.Exec(ctx, `UPDATE records SET notes = (
			SELECT coalesce(jsonb_agg(n ORDER BY i), '[]'::jsonb) FROM jsonb_array_elements(notes) WITH ORDINALITY AS x(n, i) WHERE n->>'text' <> $3)
		WHERE collection = $1 AND key = $2`, soakNotes, dropped.Record, dropped.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE records SET notes = notes || jsonb_build_array(jsonb_build_object('text', $3::text, 'at', now()))
		WHERE collection = $1 AND key = $2`, soakNotes, doubled.Record, doubled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM records WHERE collection = $1 AND key = $2`, soakPuts, deleted.ID); err != nil {
		t.Fatal(err)
	}

	after, err := checkSoak(ctx, s.pool, s.calls)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range after {
		got[f.Kind+" "+f.Subject] = true
	}
	for _, want := range []string{findLost + " " + dropped.ID, findLost + " " + deleted.ID, findDouble + " " + doubled.ID} {
		if !got[want] {
			t.Errorf("the checker did not report %q; it reported:\n%s", want, soakFindingList(after))
		}
	}
}

// soakCall is one logical tool call: its first attempt during the load and,
// for a keyed call without a definite answer, its retries after the restart.
type soakCall struct {
	ID     string // the note's text, or the put record's key: unique per logical call
	Round  int
	Keyed  bool   // notes.append with Idempotency-Key = ID; otherwise records.put without a key
	Record string // keyed: the record in soakNotes the note goes to
	conv   string
	body   []byte

	// The first attempt, during the load.
	Status  int    // HTTP status; 0 when no response came
	Outcome string // the response's "status" field
	Err     string

	// The retries after the restart.
	Retried      bool
	Attempts     int
	Conflicts    int // 409 answers
	Definite     bool
	Took         time.Duration // from the restart to the definite answer (or to giving up)
	Final        int
	FinalOutcome string
}

// Acknowledged says whether the client was told the call was applied.
func (c *soakCall) Acknowledged() bool {
	if c.Status == http.StatusOK && c.Outcome == "applied" {
		return true
	}
	return c.Retried && c.Final == http.StatusOK && c.FinalOutcome == "applied"
}

func (c *soakCall) tool() string {
	if c.Keyed {
		return "notes.append"
	}
	return "records.put"
}

// definiteAnswer is an answer a retry may stop at: the call's outcome, or a
// refusal that is not "still in flight".
func definiteAnswer(status int) bool {
	return status == http.StatusOK || status == http.StatusAccepted ||
		(status >= 400 && status < 500 && status != http.StatusConflict)
}

// soak is one database, one server process at a time, and the calls made.
type soak struct {
	t      *testing.T
	bin    string
	env    []string
	pool   *pgxpool.Pool
	srv    *soakServer
	tr     *http.Transport
	client *http.Client
	agent  string
	convs  []string
	calls  []*soakCall
}

func newSoak(t *testing.T, concurrency int) *soak {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gatehouse")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	url := dbtest.MustURL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// The load is hundreds of keyed notes.append and records.put a second
	// from one token: far above their classes' default limits (10 and 60 a
	// minute), which this test is not about. The policy file raises them,
	// as an operator would.
	policy := filepath.Join(dir, "gatehouse.yaml")
	unlimited := "    rate_limits: {per_agent_per_minute: 1000000}\n"
	if err := os.WriteFile(policy, []byte("tools:\n  notes.append:\n"+unlimited+"  records.put:\n"+unlimited), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, bin: bin, pool: pool, env: []string{
		"DATABASE_URL=" + url,
		"GATEHOUSE_POLICY_FILE=" + policy,
		"GATEHOUSE_IDEMPOTENCY_LEASE=" + soakLease.String(),
		"GATEHOUSE_ADMIN_PASSWORD=" + soakRandomHex(24),
		"GATEHOUSE_DATA_DIR=" + filepath.Join(dir, "var"),
		// info, not warn: the "listening" line that carries the port is an
		// info line.
		"GATEHOUSE_LOG_LEVEL=info",
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
	}}
	loopback := &net.Dialer{Timeout: 5 * time.Second}
	s.tr = &http.Transport{
		Proxy: nil, // never a proxy from the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
				return nil, fmt.Errorf("soak: refusing to dial %s: loopback only", addr)
			}
			return loopback.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: concurrency + 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	s.client = &http.Client{Transport: s.tr, Timeout: time.Minute}
	t.Cleanup(s.tr.CloseIdleConnections)
	s.srv = startSoakServer(t, bin, s.env)
	t.Cleanup(func() { s.srv.stop(t) }) // whichever server runs at the end

	a := auth.NewService(pool, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	ws, err := a.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const email = "soak@example.com"
	if _, err := a.CreateUser(ctx, ws, email, soakRandomHex(16), auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	if s.agent, err = a.CreateToken(ctx, email, auth.TokenAgent, "soak agent"); err != nil {
		t.Fatal(err)
	}
	user, err := a.CreateToken(ctx, email, auth.TokenUser, "soak owner")
	if err != nil {
		t.Fatal(err)
	}

	for i := range soakConversations {
		var conv struct {
			ID string `json:"id"`
		}
		s.mustAPI(http.MethodPost, "/api/v1/conversations", user, map[string]any{"title": fmt.Sprintf("soak %d", i)}, http.StatusCreated, &conv)
		s.mustAPI(http.MethodPatch, "/api/v1/conversations/"+conv.ID, user, map[string]any{"permission_mode": "auto"}, http.StatusOK, nil)
		s.convs = append(s.convs, conv.ID)
	}
	for i := range soakNoteRecords {
		s.mustAPI(http.MethodPost, "/api/v1/conversations/"+s.convs[0]+"/tool-calls", s.agent, map[string]any{"tool": "records.put",
			"arguments": map[string]any{"collection": soakNotes, "key": soakRecordKey(i), "value": map[string]any{}},
			"rationale": "create the record the soak appends notes to"}, http.StatusOK, nil)
	}
	return s
}

func soakRecordKey(i int) string { return fmt.Sprintf("r%02d", i) }

// mustAPI makes one setup request and decodes its JSON answer into out.
func (s *soak) mustAPI(method, path, token string, body any, want int, out any) {
	s.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		s.t.Fatalf("%s %s: %d, want %d\n%s", method, path, resp.StatusCode, want, got)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, got)
		}
	}
}

// newCall prepares client g's n-th call of the round: every other call is a
// keyed notes.append, the others unkeyed records.put calls.
func (s *soak) newCall(round, g, n int) *soakCall {
	id := fmt.Sprintf("soak-r%03d-g%04d-n%05d", round, g, n)
	c := &soakCall{ID: id, Round: round, Keyed: (g+n)%2 == 0, conv: s.convs[(g*7+n)%len(s.convs)]}
	call := map[string]any{"rationale": "soak call " + id}
	if c.Keyed {
		c.Record = soakRecordKey((g*13 + n) % soakNoteRecords)
		call["tool"] = "notes.append"
		call["arguments"] = map[string]any{"collection": soakNotes, "key": c.Record, "text": id}
	} else {
		call["tool"] = "records.put"
		call["arguments"] = map[string]any{"collection": soakPuts, "key": id, "value": map[string]any{"call": id, "round": round}}
	}
	c.body, _ = json.Marshal(call)
	return c
}

// send makes one attempt of the call, the same body and key every time.
func (s *soak) send(ctx context.Context, base string, c *soakCall) (status int, outcome string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/conversations/"+c.conv+"/tool-calls", bytes.NewReader(c.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.agent)
	req.Header.Set("Content-Type", "application/json")
	if c.Keyed {
		req.Header.Set("Idempotency-Key", c.ID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		// The head came but the body did not: no answer.
		return 0, "", err
	}
	var out struct {
		Status string `json:"status"`
	}
	json.Unmarshal(b, &out)
	return resp.StatusCode, out.Status, nil
}

// soakRoundStats is what one round did, for the log.
type soakRoundStats struct {
	Round                        int
	KillAfter                    time.Duration
	Calls, Keyed, Acked, NoReply int
	Other                        int // answers other than 200 applied during the load
	Retried, RetryApplied        int
	RetryApplying, RetryOther    int
	RetryConflicts, RetryFailed  int
	LongestRetry                 time.Duration
	Restart                      time.Duration
}

func (st soakRoundStats) String() string {
	return fmt.Sprintf("round %d: killed %v into the load; %d calls (%d keyed): %d acknowledged, %d without an answer, %d other answers; "+
		"restart took %v; %d keyed retries: %d applied, %d answered applying, %d other, %d without a definite answer in time; %d 409s; longest retry %v",
		st.Round, st.KillAfter.Round(time.Millisecond), st.Calls, st.Keyed, st.Acked, st.NoReply, st.Other,
		st.Restart.Round(time.Millisecond), st.Retried, st.RetryApplied, st.RetryApplying, st.RetryOther, st.RetryFailed, st.RetryConflicts,
		st.LongestRetry.Round(time.Millisecond))
}

type soakTotals struct{ soakRoundStats }

func (tt *soakTotals) add(st soakRoundStats) {
	tt.Round++
	tt.Calls += st.Calls
	tt.Keyed += st.Keyed
	tt.Acked += st.Acked
	tt.NoReply += st.NoReply
	tt.Other += st.Other
	tt.Retried += st.Retried
	tt.RetryApplied += st.RetryApplied
	tt.RetryApplying += st.RetryApplying
	tt.RetryOther += st.RetryOther
	tt.RetryConflicts += st.RetryConflicts
	tt.RetryFailed += st.RetryFailed
	tt.LongestRetry = max(tt.LongestRetry, st.LongestRetry)
}

func (tt soakTotals) String() string {
	return fmt.Sprintf("%d rounds, %d calls (%d keyed): %d acknowledged, %d without an answer, %d other answers; "+
		"%d keyed retries: %d applied, %d answered applying, %d other, %d without a definite answer in time; %d 409s; longest retry %v",
		tt.Round, tt.Calls, tt.Keyed, tt.Acked, tt.NoReply, tt.Other, tt.Retried, tt.RetryApplied, tt.RetryApplying, tt.RetryOther,
		tt.RetryFailed, tt.RetryConflicts, tt.LongestRetry.Round(time.Millisecond))
}

// round runs concurrency clients against the server, SIGKILLs it killAfter
// into the load, restarts it, and retries every keyed call that got no
// definite answer with the same key and body.
func (s *soak) round(round, concurrency int, killAfter time.Duration) soakRoundStats {
	s.t.Helper()
	st := soakRoundStats{Round: round, KillAfter: killAfter}
	base := s.srv.URL
	ctx, cancel := context.WithTimeout(s.t.Context(), soakLoadBudget)
	defer cancel()

	var killed atomic.Bool
	perClient := make([][]*soakCall, concurrency)
	var clients sync.WaitGroup
	for g := range concurrency {
		clients.Go(func() {
			for n := 0; n < soakCallsPerClient && !killed.Load() && ctx.Err() == nil; n++ {
				c := s.newCall(round, g, n)
				status, outcome, err := s.send(ctx, base, c)
				c.Status, c.Outcome = status, outcome
				if err != nil {
					c.Err = err.Error()
				}
				perClient[g] = append(perClient[g], c)
			}
		})
	}
	killer := make(chan struct{})
	go func() {
		defer close(killer)
		select {
		case <-time.After(killAfter):
		case <-ctx.Done():
		}
		s.srv.kill(s.t)
		killed.Store(true)
	}()
	<-killer
	clients.Wait()
	if ctx.Err() != nil {
		s.t.Fatalf("round %d: the load did not end within %v", round, soakLoadBudget)
	}
	s.tr.CloseIdleConnections()

	var retry []*soakCall
	for _, cs := range perClient {
		for _, c := range cs {
			st.Calls++
			switch {
			case c.Status == 0:
				st.NoReply++
			case c.Status == http.StatusOK && c.Outcome == "applied":
				st.Acked++
			default:
				st.Other++
			}
			if c.Keyed {
				st.Keyed++
				if !definiteAnswer(c.Status) {
					retry = append(retry, c)
				}
			}
			s.calls = append(s.calls, c)
		}
	}

	started := time.Now()
	s.srv = startSoakServer(s.t, s.bin, s.env)
	restarted := time.Now()
	st.Restart = restarted.Sub(started)
	s.retryAll(retry, concurrency, restarted)
	for _, c := range retry {
		st.Retried++
		st.RetryConflicts += c.Conflicts
		st.LongestRetry = max(st.LongestRetry, c.Took)
		switch {
		case !c.Definite:
			st.RetryFailed++
		case c.Final == http.StatusOK && c.FinalOutcome == "applied":
			st.RetryApplied++
		case c.FinalOutcome == "applying":
			st.RetryApplying++
		default:
			st.RetryOther++
		}
	}
	return st
}

// retryAll retries the calls on the restarted server, concurrency at a time,
// each until it gets a definite answer or the lease plus the margin has
// passed since the restart.
func (s *soak) retryAll(calls []*soakCall, concurrency int, restarted time.Time) {
	ctx, cancel := context.WithDeadline(s.t.Context(), restarted.Add(soakLease+soakRetryMargin))
	defer cancel()
	base := s.srv.URL
	work := make(chan *soakCall)
	var workers sync.WaitGroup
	for range min(concurrency, len(calls)) {
		workers.Go(func() {
			for c := range work {
				c.Retried, c.Took = true, time.Since(restarted)
				for ctx.Err() == nil && c.Attempts < 1000 {
					status, outcome, _ := s.send(ctx, base, c)
					c.Attempts++
					c.Final, c.FinalOutcome, c.Took = status, outcome, time.Since(restarted)
					if definiteAnswer(status) {
						c.Definite = true
						break
					}
					if status == http.StatusConflict {
						c.Conflicts++ // in flight: allowed until the lease has passed
					}
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		})
	}
	for _, c := range calls {
		work <- c
	}
	close(work)
	workers.Wait()
}

// Kinds of findings.
const (
	findLost          = "lost"
	findDouble        = "double"
	findApplying      = "applying"
	findAppliedNoEff  = "applied-without-effect"
	findRetry         = "retry"
	findUnexpectedAns = "unexpected-answer"
)

var soakFindingKinds = []struct{ kind, what string }{
	{findLost, "acknowledged effects lost"},
	{findDouble, "double executions (a note present more than once)"},
	{findApplying, "in-database tool calls left applying"},
	{findAppliedNoEff, "proposals recorded applied whose effect is missing"},
	{findRetry, "keyed retries without a definite answer within the lease + margin"},
	{findUnexpectedAns, "answers during the load other than 200 applied"},
}

// soakFinding is one thing the checker found wrong.
type soakFinding struct {
	Kind    string
	Subject string // the call id, or the proposal id
	Tool    string
	Detail  string
}

// checkSoak is the checker of the crash suite (and of its control): it
// compares the database with what the clients were told.
func checkSoak(ctx context.Context, pool *pgxpool.Pool, calls []*soakCall) ([]soakFinding, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out []soakFinding
	add := func(kind, subject, tool, format string, args ...any) {
		out = append(out, soakFinding{Kind: kind, Subject: subject, Tool: tool, Detail: fmt.Sprintf(format, args...)})
	}

	notes := map[string]int{} // note text → how many times it is present
	rows, err := pool.Query(ctx, `SELECT n->>'text', count(*) FROM records r CROSS JOIN LATERAL jsonb_array_elements(r.notes) AS n
		WHERE r.collection = $1 GROUP BY 1`, soakNotes)
	if err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	for rows.Next() {
		var text string
		var n int
		if err := rows.Scan(&text, &n); err != nil {
			return nil, err
		}
		notes[text] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read notes: %w", err)
	}
	puts := map[string]string{} // record key → the call its value names
	rows, err = pool.Query(ctx, `SELECT key, coalesce(value->>'call', '') FROM records WHERE collection = $1`, soakPuts)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	for rows.Next() {
		var key, call string
		if err := rows.Scan(&key, &call); err != nil {
			return nil, err
		}
		puts[key] = call
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}

	for _, c := range calls {
		if c.Acknowledged() {
			switch {
			case c.Keyed && notes[c.ID] == 0:
				add(findLost, c.ID, "notes.append", "note %s on %s/%s (round %d) was acknowledged but is missing", c.ID, soakNotes, c.Record, c.Round)
			case !c.Keyed:
				if got, ok := puts[c.ID]; !ok {
					add(findLost, c.ID, "records.put", "record %s/%s (round %d) was acknowledged but is missing", soakPuts, c.ID, c.Round)
				} else if got != c.ID {
					add(findLost, c.ID, "records.put", "record %s/%s (round %d) was acknowledged but holds %q", soakPuts, c.ID, c.Round, got)
				}
			}
		}
		if c.Retried && !c.Definite {
			add(findRetry, c.ID, "notes.append", "%s (round %d): %d attempts, %d 409s, last answer %d %q after %v",
				c.ID, c.Round, c.Attempts, c.Conflicts, c.Final, c.FinalOutcome, c.Took.Round(time.Millisecond))
		}
		if c.Status != 0 && (c.Status != http.StatusOK || c.Outcome != "applied") {
			add(findUnexpectedAns, c.ID, c.tool(), "%s (round %d): %d %q", c.ID, c.Round, c.Status, c.Outcome)
		}
	}
	for text, n := range notes {
		if n > 1 {
			add(findDouble, text, "notes.append", "note %s is present %d times", text, n)
		}
	}

	rows, err = pool.Query(ctx, `SELECT id::text, tool, coalesce(arguments->>'text', arguments->>'key', ''), created_at FROM proposals
		WHERE status = 'applying' AND tool = ANY ($1) ORDER BY created_at`, soakInDatabaseTools)
	if err != nil {
		return nil, fmt.Errorf("read applying proposals: %w", err)
	}
	for rows.Next() {
		var id, tool, call string
		var at time.Time
		if err := rows.Scan(&id, &tool, &call, &at); err != nil {
			return nil, err
		}
		add(findApplying, id, tool, "proposal %s: %s %s, created %s", id, tool, call, at.Format("15:04:05.000"))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applying proposals: %w", err)
	}

	rows, err = pool.Query(ctx, `SELECT id::text, tool, coalesce(arguments->>'text', ''), coalesce(arguments->>'key', ''), coalesce(arguments->'value'->>'call', '')
		FROM proposals WHERE status = 'applied'
		  AND ((tool = 'notes.append' AND arguments->>'collection' = $1) OR (tool = 'records.put' AND arguments->>'collection' = $2))`, soakNotes, soakPuts)
	if err != nil {
		return nil, fmt.Errorf("read applied proposals: %w", err)
	}
	for rows.Next() {
		var id, tool, text, key, call string
		if err := rows.Scan(&id, &tool, &text, &key, &call); err != nil {
			return nil, err
		}
		switch {
		case tool == "notes.append" && notes[text] == 0:
			add(findAppliedNoEff, id, tool, "proposal %s (notes.append %s) is applied but the note is missing", id, text)
		case tool == "records.put" && puts[key] != call:
			add(findAppliedNoEff, id, tool, "proposal %s (records.put %s) is applied but the record holds %q", id, key, puts[key])
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied proposals: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Subject < out[j].Subject
	})
	return out, nil
}

// reportSoakFindings fails the test with the findings not reported in an
// earlier round, one error per kind with its count and a few examples.
func reportSoakFindings(t *testing.T, round int, findings []soakFinding, reported map[string]bool) {
	t.Helper()
	byKind := map[string][]soakFinding{}
	for _, f := range findings {
		if k := f.Kind + " " + f.Subject; !reported[k] {
			reported[k] = true
			byKind[f.Kind] = append(byKind[f.Kind], f)
		}
	}
	for _, k := range soakFindingKinds {
		fs := byKind[k.kind]
		if len(fs) == 0 {
			continue
		}
		t.Errorf("round %d: %d new %s, e.g.:\n%s", round, len(fs), k.what, soakFindingList(fs[:min(len(fs), 5)]))
	}
}

// soakFindingCounts counts findings by kind and tool.
func soakFindingCounts(fs []soakFinding) string {
	var parts []string
	for _, k := range soakFindingKinds {
		byTool := map[string]int{}
		n := 0
		for _, f := range fs {
			if f.Kind == k.kind {
				byTool[f.Tool]++
				n++
			}
		}
		if n == 0 {
			continue
		}
		var tools []string
		for tool, m := range byTool {
			tools = append(tools, fmt.Sprintf("%s %d", tool, m))
		}
		sort.Strings(tools)
		parts = append(parts, fmt.Sprintf("%d %s (%s)", n, k.what, strings.Join(tools, ", ")))
	}
	return strings.Join(parts, "; ")
}

func soakFindingList(fs []soakFinding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "    [%s] %s\n", f.Kind, f.Detail)
	}
	return b.String()
}

// soakServer is a `gatehouse serve` subprocess.
type soakServer struct {
	URL  string
	cmd  *exec.Cmd
	log  *soakLog
	done chan struct{}
}

// startSoakServer starts the binary on a free loopback port and waits until
// it listens.
func startSoakServer(t *testing.T, bin string, env []string) *soakServer {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = env
	cmd.Stdout = io.Discard
	s := &soakServer{cmd: cmd, log: &soakLog{}, done: make(chan struct{})}
	cmd.Stderr = s.log
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	deadline := time.After(time.Minute)
	for {
		if m := listening.FindStringSubmatch(s.log.Head()); m != nil {
			if !strings.HasPrefix(m[1], "http://127.0.0.1:") {
				s.kill(t)
				t.Fatalf("the server listens on %s, not on 127.0.0.1", m[1])
			}
			s.URL = m[1]
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("serve exited early: %v\n%s", cmd.ProcessState, s.log)
		case <-deadline:
			s.kill(t)
			t.Fatalf("serve did not listen within a minute:\n%s", s.log)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL: no shutdown, no drain, no deferred cleanup.
func (s *soakServer) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Errorf("the server did not die within 10 s of SIGKILL")
	}
}

// stop ends the server at the end of the test: SIGTERM, then SIGKILL.
func (s *soakServer) stop(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.kill(t)
	}
}

// soakLog keeps the head of the server's log (where the "listening" line
// is) and its tail, for diagnostics; the lines in between are dropped.
type soakLog struct {
	mu         sync.Mutex
	head, tail []byte
	dropped    int
}

const soakLogKeep = 64 << 10

func (l *soakLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	written := len(p)
	if room := soakLogKeep - len(l.head); room > 0 {
		n := min(room, len(p))
		l.head = append(l.head, p[:n]...)
		p = p[n:]
	}
	l.tail = append(l.tail, p...)
	if over := len(l.tail) - soakLogKeep; over > 0 {
		l.dropped += over
		l.tail = slices.Delete(l.tail, 0, over)
	}
	return written, nil
}

// Head is the start of the log.
func (l *soakLog) Head() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.head)
}

func (l *soakLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped == 0 {
		return string(l.head) + string(l.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes ...]\n%s", l.head, l.dropped, l.tail)
}

func soakEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100000 {
		t.Fatalf("%s=%q: want a whole number from 1 to 100000", name, v)
	}
	return n
}

func soakRandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
