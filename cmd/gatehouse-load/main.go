// Command gatehouse-load drives a running Gatehouse at a constant request
// rate (vegeta) and reports latency percentiles for the hot paths, each
// beside a baseline measured in the same run, so the ratios mean something
// on a shared, noisy machine.
//
//	gatehouse-load -url http://127.0.0.1:8080 -token gh_a_… -rate 50 -duration 10s
//
// The token must be an agent (or user) token; the tool creates its own
// conversation to propose into. `make load` starts a throwaway server and
// runs this against it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse-load:", err)
		os.Exit(1)
	}
}

// phase is one measured path.
type phase struct {
	name, method, path string
	body               func(i uint64) []byte
	note               string
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gatehouse-load", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the server")
	token := fs.String("token", os.Getenv("GATEHOUSE_TOKEN"), "an agent or user token (or GATEHOUSE_TOKEN)")
	rate := fs.Int("rate", 50, "requests per second in each phase")
	duration := fs.Duration("duration", 10*time.Second, "length of each phase")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *token == "" {
		return errors.New("-token is required")
	}
	conv, err := createConversation(*base, *token)
	if err != nil {
		return err
	}
	calls := "/api/v1/conversations/" + conv + "/tool-calls"
	phases := []phase{
		{name: "baseline: healthz", method: http.MethodGet, path: "/healthz", note: "no database"},
		{name: "baseline: GET /api/v1/me", method: http.MethodGet, path: "/api/v1/me", note: "token lookup: one indexed read"},
		{name: "propose read (auto-run)", method: http.MethodPost, path: calls, note: "validate, decide, record, claim, run, record",
			body: func(uint64) []byte {
				return []byte(`{"tool":"records.search","arguments":{"query":"acme"},"rationale":"load test: look up a client"}`)
			}},
		{name: "propose change (confirm card)", method: http.MethodPost, path: calls, note: "validate, decide, record; waits for the owner",
			body: func(i uint64) []byte {
				return []byte(fmt.Sprintf(`{"tool":"records.put","arguments":{"collection":"load","key":"k%d","value":{"n":%d}},"rationale":"load test: record a value"}`, i, i))
			}},
	}
	fmt.Fprintf(out, "%d req/s for %s per phase against %s\n\n", *rate, *duration, *base)
	fmt.Fprintf(out, "%-32s %9s %9s %9s %8s %8s  %s\n", "phase", "p50", "p95", "p99", "ok", "×p50 me", "what it does")
	var baseline time.Duration
	for _, p := range phases {
		m := attack(*base, *token, p, *rate, *duration)
		if p.path == "/api/v1/me" {
			baseline = m.Latencies.P50
		}
		ratio := "-"
		if baseline > 0 {
			ratio = fmt.Sprintf("%.1f", float64(m.Latencies.P50)/float64(baseline))
		}
		fmt.Fprintf(out, "%-32s %9s %9s %9s %7.1f%% %8s  %s\n", p.name, round(m.Latencies.P50), round(m.Latencies.P95), round(m.Latencies.P99),
			100*m.Success, ratio, p.note)
		if len(m.Errors) > 0 {
			fmt.Fprintf(out, "%32s errors: %v\n", "", m.Errors)
		}
	}
	return nil
}

func attack(base, token string, p phase, rate int, d time.Duration) vegeta.Metrics {
	var i uint64
	targeter := func(t *vegeta.Target) error {
		i++
		t.Method, t.URL = p.method, base+p.path
		t.Header = http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
		if p.body != nil {
			t.Body = p.body(i)
		}
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.Timeout(30 * time.Second))
	var m vegeta.Metrics
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: rate, Per: time.Second}, d, p.name) {
		m.Add(res)
	}
	m.Close()
	return m
}

func createConversation(base, token string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/conversations", bytes.NewReader([]byte(`{"title":"load test"}`)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var c struct {
		ID     string `json:"id"`
		Detail string `json:"detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create a conversation: %d %s %v", resp.StatusCode, c.Detail, err)
	}
	return c.ID, nil
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
