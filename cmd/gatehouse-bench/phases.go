package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// bench drives the server's REST API.
type bench struct {
	base, pprof  string
	dbURL        string // the cluster, for the WAL counters
	agent, owner string // tokens: the agent proposes, the owner sets modes and applies
	pid          int
	out          io.Writer
}

// row is one line of the report.
type row struct {
	Name    string
	Clients int
	Want    string // the status every call should get
	Calls   int    // calls completed
	OK      int    // of which with the wanted status
	Elapsed time.Duration
	// Rate is completed calls per second (pgbench: its own tps).
	Rate             float64
	P50, P95, P99    time.Duration
	RSSStart, RSSEnd int64 // the server's resident set, KiB; 0: not measured
	// Cost is per call: WAL written by the cluster, the server's and
	// PostgreSQL's CPU.
	Cost callCost
	// WAL is the phase's WAL per call by relation (the headline phase's
	// only; see walShares).
	WAL    []walShare
	Note   string
	Errors []string // a few distinct unexpected answers
}

// target fills in the i-th call (from 1) of one client. It returns
// vegeta.ErrNoTargets when the client has nothing left to send.
type target func(client int, i uint64, t *vegeta.Target) error

// loop runs a closed loop: each of clients sends a call, waits for its
// answer, and sends the next, for d. Each client is a vegeta attacker of
// one worker at an unbounded rate (vegeta.Rate{Freq: 0}), so it has an
// identity (its own conversation, its own proposals to apply) and its own
// keep-alive connection, as each pgbench client has its own session.
func (b *bench) loop(ctx context.Context, name string, clients int, d time.Duration, want int, tf target) row {
	return b.loopChecked(ctx, name, clients, d, want, nil, tf)
}

// loopChecked is loop whose answers with the wanted status are also
// checked by check (nil: not checked), which says what is wrong with a
// body ("": nothing).
func (b *bench) loopChecked(ctx context.Context, name string, clients int, d time.Duration, want int, check func(body []byte) string, tf target) row {
	return b.measure(ctx, name, clients, strconv.Itoa(want), func(record func(time.Duration, bool, string)) {
		var wg sync.WaitGroup
		attackers := make([]*vegeta.Attacker, clients)
		for c := range attackers {
			attackers[c] = vegeta.NewAttacker(vegeta.Workers(1), vegeta.MaxWorkers(1), vegeta.Timeout(30*time.Second), vegeta.KeepAlive(true))
		}
		stop := context.AfterFunc(ctx, func() {
			for _, a := range attackers {
				a.Stop()
			}
		})
		defer stop()
		for c, a := range attackers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var i uint64
				tr := func(t *vegeta.Target) error { i++; return tf(c, i, t) } // one worker: never concurrent
				for res := range a.Attack(tr, vegeta.Rate{Freq: 0}, d, name) {
					if res.Error == vegeta.ErrNoTargets.Error() {
						continue
					}
					failure := ""
					if int(res.Code) == want && check != nil {
						failure = check(res.Body)
					} else if int(res.Code) != want {
						body := res.Body
						if len(body) > 300 {
							body = body[:300]
						}
						failure = fmt.Sprintf("%d %s %s", res.Code, res.Error, bytes.TrimSpace(body))
					}
					record(res.Latency, failure == "", failure)
				}
			}()
		}
		wg.Wait()
	})
}

// measure runs one phase (run, which reports each call to record: its
// latency, whether it got the wanted answer, and what it got otherwise)
// and makes its row: rate, latencies, the server's RSS and each call's
// cost (WAL, CPU).
func (b *bench) measure(ctx context.Context, name string, clients int, want string, run func(record func(lat time.Duration, ok bool, failure string))) row {
	r := row{Name: name, Clients: clients, Want: want, RSSStart: rssKiB(b.pid)}
	before := costNow(ctx, b.dbURL, b.pid)
	var (
		mu     sync.Mutex
		lat    []time.Duration
		errors = map[string]bool{}
	)
	start := time.Now()
	run(func(l time.Duration, ok bool, failure string) {
		mu.Lock()
		defer mu.Unlock()
		lat = append(lat, l)
		if ok {
			r.OK++
		} else if len(errors) < 5 {
			errors[failure] = true
		}
	})
	r.Elapsed = time.Since(start)
	r.RSSEnd = rssKiB(b.pid)
	r.Calls = len(lat)
	after := costNow(context.WithoutCancel(ctx), b.dbURL, b.pid)
	r.Cost = perCall(before, after, r.Calls)
	if isHeadline(name) {
		r.WAL = walShares(context.WithoutCancel(ctx), b.dbURL, before.lsn, after.lsn, r.Calls, walSharesLimit)
	}
	r.Rate = float64(r.Calls) / r.Elapsed.Seconds()
	r.P50, r.P95, r.P99 = percentile(lat, 0.50), percentile(lat, 0.95), percentile(lat, 0.99)
	for e := range errors {
		r.Errors = append(r.Errors, e)
	}
	slices.Sort(r.Errors)
	return r
}

func (b *bench) callsURL(conv string) string {
	return b.base + "/api/v1/conversations/" + conv + "/tool-calls"
}

func (b *bench) post(t *vegeta.Target, url, token string, body []byte) {
	t.Method, t.URL, t.Body = http.MethodPost, url, body
	t.Header = http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
}

// put is records.put of a new key: auto-applied in an auto conversation,
// a confirm card in an approve one.
func putBody(key string, i uint64) []byte {
	return fmt.Appendf(nil, `{"tool":"records.put","arguments":{"collection":"bench","key":%q,"value":{"n":%d}},"rationale":"benchmark: record a value for later"}`, key, i)
}

// phases runs the HTTP phases in order and adds their rows to rep.
func (b *bench) phases(ctx context.Context, o options, rep *report) error {
	n := o.clients
	if err := quietPeople(ctx, b.dbURL); err != nil {
		return err
	}
	hot, err := b.conversation(ctx, "auto", "bench: one conversation")
	if err != nil {
		return err
	}
	spread := make([]string, n)
	held := make([]string, n)
	for c := range n {
		if spread[c], err = b.conversation(ctx, "auto", fmt.Sprintf("bench: client %d", c)); err != nil {
			return err
		}
		if held[c], err = b.conversation(ctx, "approve", fmt.Sprintf("bench: approve, client %d", c)); err != nil {
			return err
		}
	}
	// Something for the searches to find: a collection of 20 records.
	for i := range 20 {
		body := fmt.Appendf(nil, `{"tool":"records.put","arguments":{"collection":"lookup","key":"client-%02d","value":{"name":"Acme %02d Ltd"}},"rationale":"benchmark: seed the lookup collection"}`, i, i)
		if _, err := b.request(ctx, b.callsURL(hot), b.agent, body, http.StatusOK); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	search := func(conv string) target {
		return func(_ int, _ uint64, t *vegeta.Target) error {
			b.post(t, b.callsURL(conv), b.agent, []byte(`{"tool":"records.search","arguments":{"query":"acme","collection":"lookup"},"rationale":"benchmark: look up a client"}`))
			return nil
		}
	}
	warm := b.loop(ctx, "warm-up", n, max(time.Second, o.duration/5), http.StatusOK, search(hot))
	if warm.OK == 0 {
		return fmt.Errorf("warm-up: no call succeeded: %v", warm.Errors)
	}

	add := func(r row, note string) {
		r.Note = note
		rep.phases = append(rep.phases, r)
		fmt.Fprintln(b.out, progress(r))
	}
	// Reads first, while the records table holds little more than the
	// seeded collection: the phases measure the gate, not a growing scan.
	add(b.loop(ctx, "records.search, auto-run", n, o.duration, http.StatusOK, search(hot)),
		"read in one conversation: decide, record, run, record")
	// records.get reads one record by its primary key: the read path's
	// cost with next to nothing of the tool's own.
	getREST := func(name string) row {
		return b.loop(ctx, name, n, o.duration, http.StatusOK, func(_ int, i uint64, t *vegeta.Target) error {
			b.post(t, b.callsURL(hot), b.agent, fmt.Appendf(nil, `{"tool":"records.get","arguments":{"collection":"lookup","key":"client-%02d"},"rationale":"benchmark: read a client"}`, i%20))
			return nil
		})
	}
	restGet := getREST("records.get, auto-run")
	add(restGet, "read one of the seeded records by key, in the same conversation: the read path without the search")
	// Over MCP: records.get against the row above (and the same again
	// after it), and an upstream's tool directly and through the gate.
	if err := b.mcpPhases(ctx, o, rep, hot, restGet, func() row { return getREST("records.get, auto-run, again") }); err != nil {
		return err
	}
	if o.mcpOnly {
		for _, v := range rep.mcp.verdicts() {
			fmt.Fprintln(b.out, "  "+v)
		}
		return nil
	}

	headline := "records.put, auto-apply, one conversation"
	var profile chan string
	if o.profile {
		profile = b.startProfile(ctx, min(10*time.Second, o.duration))
	}
	add(b.loop(ctx, headline, n, o.duration, http.StatusOK, func(c int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(hot), b.agent, putBody(fmt.Sprintf("one-%d-%d", c, i), i))
		return nil
	}), "every client in the same conversation")
	if profile != nil {
		rep.profile = <-profile
	}
	putSpread := b.loop(ctx, "records.put, auto-apply, eight conversations", n, o.duration, http.StatusOK, func(c int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(spread[c]), b.agent, putBody(fmt.Sprintf("eight-%d-%d", c, i), i))
		return nil
	})
	putSpread.Name = fmt.Sprintf("records.put, auto-apply, %d conversations", n)
	add(putSpread, "each client its own conversation")

	// Overload: more clients than the server's group-commit writers, so
	// calls queue and share transactions (internal/proposals/group.go).
	add(b.loop(ctx, "records.put, auto-apply, one conversation, overload", overloadClients(n), o.duration, http.StatusOK, func(c int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(hot), b.agent, putBody(fmt.Sprintf("over-%d-%d", c, i), i))
		return nil
	}), "four times the clients, one conversation: calls beyond the writers share a transaction")

	add(b.loop(ctx, "webhook.post, refused", n, o.duration, http.StatusForbidden, func(c int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(hot), b.agent, fmt.Appendf(nil, `{"tool":"webhook.post","arguments":{"url":"https://hooks.example.com/bench","payload":{"n":%d}},"rationale":"benchmark: notify a hook off the allowlist"}`, i))
		t.Header.Set("Idempotency-Key", fmt.Sprintf("bench-refused-%d-%d-%s", c, i, runID))
		return nil
	}), "host off the (empty) allowlist: 403, audit row and refusal receipt")

	// Applies: enough calls proposed in approve mode for the phase, each
	// client applying its own, once each.
	perClient := int(math.Ceil(1.5*putSpread.Rate*o.duration.Seconds()/float64(n))) + 8
	perClient = min(perClient, 50_000)
	began := time.Now()
	queues, err := b.propose(ctx, held, perClient)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "  (proposed %d calls in approve mode in %s)\n", perClient*n, time.Since(began).Round(time.Millisecond))
	apply := b.loop(ctx, "apply (owner's confirm)", n, o.duration, http.StatusOK, func(c int, _ uint64, t *vegeta.Target) error {
		if len(queues[c]) == 0 {
			return vegeta.ErrNoTargets
		}
		id := queues[c][0]
		queues[c] = queues[c][1:]
		b.post(t, b.base+"/api/v1/proposals/"+id+"/apply", b.owner, nil)
		return nil
	})
	note := "POST /api/v1/proposals/{id}/apply with the owner's token; each client its own approve-mode conversation"
	if apply.Elapsed < o.duration {
		note += fmt.Sprintf("; ran out of proposals after %s", apply.Elapsed.Round(time.Millisecond))
	}
	add(apply, note)

	add(b.loop(ctx, "records.put, auto-apply, single client", 1, o.duration, http.StatusOK, func(_ int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(hot), b.agent, putBody(fmt.Sprintf("single-%d", i), i))
		return nil
	}), "one client, one conversation")

	if o.soak > 0 {
		s, err := b.soak(ctx, o.soak, n, spread)
		if err != nil {
			return err
		}
		rep.soak = &s
		fmt.Fprintln(b.out, progress(s.row))
	}
	return nil
}

// overloadClients is the overload phase's client count: four times the
// concurrent phases'.
func overloadClients(n int) int { return 4 * n }

// runID keeps idempotency keys distinct across runs on one database.
var runID = randomHex(4)

// propose fills one queue per client with the ids of perClient records.put
// calls proposed in that client's approve-mode conversation.
func (b *bench) propose(ctx context.Context, convs []string, perClient int) ([][]string, error) {
	queues := make([][]string, len(convs))
	errs := make([]error, len(convs))
	var wg sync.WaitGroup
	for c, conv := range convs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				body, err := b.request(ctx, b.callsURL(conv), b.agent, putBody(fmt.Sprintf("applied-%d-%d", c, i), uint64(i)), http.StatusAccepted)
				if err != nil {
					errs[c] = fmt.Errorf("propose in approve mode: %w", err)
					return
				}
				var p struct {
					ID string `json:"proposal_id"`
				}
				if err := json.Unmarshal(body, &p); err != nil || p.ID == "" {
					errs[c] = fmt.Errorf("propose in approve mode: no proposal_id in %s", body)
					return
				}
				queues[c] = append(queues[c], p.ID)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return queues, nil
}

// conversation creates a conversation (as the agent, for its owner) and
// sets its permission mode with the owner's token.
func (b *bench) conversation(ctx context.Context, mode, title string) (string, error) {
	body, err := b.request(ctx, b.base+"/api/v1/conversations", b.agent, fmt.Appendf(nil, `{"title":%q}`, title), http.StatusCreated)
	if err != nil {
		return "", fmt.Errorf("create a conversation: %w", err)
	}
	var c struct {
		ID   string `json:"id"`
		Mode string `json:"permission_mode"`
	}
	if err := json.Unmarshal(body, &c); err != nil || c.ID == "" {
		return "", fmt.Errorf("create a conversation: no id in %s", body)
	}
	if c.Mode != mode {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, b.base+"/api/v1/conversations/"+c.ID, bytes.NewReader(fmt.Appendf(nil, `{"permission_mode":%q}`, mode)))
		if _, err := b.do(req, b.owner, http.StatusOK); err != nil {
			return "", fmt.Errorf("set the conversation's mode to %s: %w", mode, err)
		}
	}
	return c.ID, nil
}

func (b *bench) request(ctx context.Context, url, token string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return b.do(req, token, want)
}

func (b *bench) do(req *http.Request, token string, want int) ([]byte, error) {
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %d, want %d: %s", req.Method, req.URL.Path, resp.StatusCode, want, body)
	}
	return body, nil
}

// startProfile takes a CPU profile of the next d from the server's pprof
// listener and sends the file's path (or why there is none).
func (b *bench) startProfile(ctx context.Context, d time.Duration) chan string {
	done := make(chan string, 1)
	if b.pprof == "" {
		done <- "none: the server has no pprof listener (set GATEHOUSE_PPROF_ADDR)"
		return done
	}
	go func() {
		done <- func() string {
			url := fmt.Sprintf("%sprofile?seconds=%d", b.pprof, int(d.Seconds()))
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return "none: " + err.Error()
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return "none: " + resp.Status
			}
			f, err := os.CreateTemp("", "gatehouse-cpu-*.pprof")
			if err != nil {
				return "none: " + err.Error()
			}
			defer f.Close()
			if _, err := io.Copy(f, resp.Body); err != nil {
				return "none: " + err.Error()
			}
			return f.Name()
		}()
	}()
	return done
}

// soakResult is a long 8-client phase with the server's RSS sampled.
type soakResult struct {
	row
	Samples []rssSample
}

type rssSample struct {
	At  time.Duration
	KiB int64
}

// soak runs auto-applied records.put over the clients' own conversations
// for d, sampling the server's RSS every 10 s.
func (b *bench) soak(ctx context.Context, d time.Duration, n int, convs []string) (soakResult, error) {
	var s soakResult
	if b.pid == 0 {
		return s, fmt.Errorf("soak: -server-pid is needed to sample the server's memory")
	}
	fmt.Fprintf(b.out, "  (soak: %s, sampling RSS every 10s)\n", d)
	start := time.Now()
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		s.Samples = append(s.Samples, rssSample{0, rssKiB(b.pid)})
		for {
			select {
			case <-stop:
				if at := time.Since(start); at-s.Samples[len(s.Samples)-1].At > time.Second {
					s.Samples = append(s.Samples, rssSample{at, rssKiB(b.pid)})
				}
				return
			case <-tick.C:
				s.Samples = append(s.Samples, rssSample{time.Since(start), rssKiB(b.pid)})
			}
		}
	}()
	s.row = b.loop(ctx, fmt.Sprintf("soak: records.put, %d conversations", n), n, d, http.StatusOK, func(c int, i uint64, t *vegeta.Target) error {
		b.post(t, b.callsURL(convs[c]), b.agent, putBody(fmt.Sprintf("soak-%d-%d", c, i), i))
		return nil
	})
	close(stop)
	<-sampled
	return s, ctx.Err()
}

// quietPeople turns off every bench person's notifications: a card or a
// packet that waits mails its person in the background (internal/notify),
// and the phases that propose thousands of calls in approve mode would
// measure that mail (about five writes a card) instead of the call. A
// person is told at human pace; the gate is measured here.
func quietPeople(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO notification_preferences (workspace_id, user_id, email)
		SELECT workspace_id, user_id, false FROM workspace_members
		ON CONFLICT (workspace_id, user_id) DO UPDATE SET email = false, webhook_url = NULL, webhook_secret = NULL`)
	if err != nil {
		return fmt.Errorf("turn the bench's notifications off: %w", err)
	}
	return nil
}
