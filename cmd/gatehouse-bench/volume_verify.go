package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// The volume phase's last step: a full verification of the filled
// workspace's chain (every receipt, from seq 1) runs in the background
// while agents keep calling. It answers the issue's "a full verify of 1M
// receipts in the background under 60 s while calls keep their latency
// within 2x": auto-applied records.put at the phase's clients, first
// alone, then while the verification runs (from its start until it is
// done), on the same server and database.

// verifyTargets are the targets the step is marked against.
const (
	verifyMaxSeconds = 60 // at 1M receipts, scaled down for fewer
	verifyMaxSlowing = 2.0
	verifyTargetAt   = 1_000_000
	// verifyLimit is how long the calls beside a run go on at most.
	verifyLimit = 10 * time.Minute
)

// verifyResult is the step's measurements.
type verifyResult struct {
	Receipts int64 // the chain's length the run verified (its target seq)
	OK       bool
	// Took is the run's time on the server (started to finished);
	// Wall from the request to the poll that saw it done.
	Took, Wall       time.Duration
	Alone, Meanwhile row // the calls without and with the run
	Err              string
}

// slowing is the calls' median while the run ran over their median alone.
func (v verifyResult) slowing() float64 {
	if v.Alone.P50 <= 0 || v.Meanwhile.P50 <= 0 {
		return 0
	}
	return float64(v.Meanwhile.P50) / float64(v.Alone.P50)
}

// budget is the time the run may take at this length: 60 s per million.
func (v verifyResult) budget() time.Duration {
	return time.Duration(float64(verifyMaxSeconds*time.Second) * float64(max(v.Receipts, 1)) / verifyTargetAt)
}

// verdict marks the step against the targets.
func (v verifyResult) verdict() string {
	switch {
	case v.Err != "":
		return "not measured: " + v.Err
	case !v.OK:
		return "miss: the chain did not verify"
	case v.Took > v.budget():
		return fmt.Sprintf("miss: %s > %s", v.Took.Round(100*time.Millisecond), v.budget().Round(100*time.Millisecond))
	case v.slowing() > verifyMaxSlowing:
		return fmt.Sprintf("miss: calls %.1f× slower", v.slowing())
	}
	return "pass"
}

// measureVerify runs the step on the volume server: clients calls for d
// alone, then while a full verification runs (at most limit).
func measureVerify(ctx context.Context, tgt volumeTarget, l verifyLoad, out io.Writer) verifyResult {
	clients, d, limit := l.clients, l.d, l.limit
	b := &bench{base: tgt.base, dbURL: l.dbURL, agent: tgt.acct.agent, owner: tgt.acct.ownerToken, pid: tgt.pid, out: io.Discard}
	var res verifyResult
	conv, err := b.conversation(ctx, "auto", "bench: calls beside a verification")
	if err != nil {
		res.Err = err.Error()
		return res
	}
	put := func(prefix string) target {
		return func(c int, i uint64, t *vegeta.Target) error {
			b.post(t, b.callsURL(conv), b.agent, putBody(fmt.Sprintf("%s-%d-%d", prefix, c, i), i))
			return nil
		}
	}
	res.Alone = b.loop(ctx, "records.put, alone", clients, d, http.StatusOK, put("alone"))
	fmt.Fprintf(out, "  (verify: calls alone %d/s, p50 %s; starting a full verification)\n", int(res.Alone.Rate), res.Alone.P50)

	api := &apiClient{base: tgt.base, http: &http.Client{Timeout: time.Minute}}
	var run struct {
		ID         string     `json:"id"`
		Status     string     `json:"status"`
		StartedAt  *time.Time `json:"started_at"`
		FinishedAt *time.Time `json:"finished_at"`
		Result     *struct {
			OK      bool  `json:"ok"`
			Checked int64 `json:"checked"`
		} `json:"result"`
		Error string `json:"error"`
	}
	read := func(m map[string]any, err error) error {
		if err != nil {
			return err
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &run)
	}
	began := time.Now()
	err = read(api.call(ctx, http.MethodPost, "/api/v1/receipts/verifications", tgt.acct.adminToken, nil, http.StatusAccepted))
	if err != nil {
		res.Err = "start: " + err.Error()
		return res
	}
	status := "/api/v1/receipts/verifications/" + run.ID
	lctx, stop := context.WithTimeout(ctx, limit)
	defer stop()
	calls := make(chan row, 1)
	go func() {
		calls <- b.loop(lctx, "records.put, beside the verification", clients, limit, http.StatusOK, put("beside"))
	}()
	for {
		select {
		case <-lctx.Done():
		case <-time.After(250 * time.Millisecond):
			if err := read(api.call(ctx, http.MethodGet, status, tgt.acct.adminToken, nil, http.StatusOK)); err != nil {
				res.Err = "status: " + err.Error()
				stop()
			} else if run.Status == "done" || run.Status == "failed" {
				res.Wall = time.Since(began)
				stop()
			}
			continue
		}
		break
	}
	res.Meanwhile = <-calls
	switch {
	case res.Err != "":
	case run.Status == "failed":
		res.Err = "the run failed: " + run.Error
	case run.Status != "done":
		res.Err = fmt.Sprintf("not done after %s (%s)", limit, run.Status)
	case run.Result == nil || run.StartedAt == nil || run.FinishedAt == nil:
		res.Err = "the finished run has no result or times"
	default:
		res.OK, res.Receipts = run.Result.OK, run.Result.Checked
		res.Took = run.FinishedAt.Sub(*run.StartedAt)
	}
	fmt.Fprintf(out, "  (verify: %d receipts in %s (%s from the request), ok %v; calls meanwhile %d/s, p50 %s: %s)\n",
		res.Receipts, res.Took.Round(time.Millisecond), res.Wall.Round(time.Millisecond), res.OK,
		int(res.Meanwhile.Rate), res.Meanwhile.P50, res.verdict())
	return res
}

// summary is the step's line under the volume table.
func (v verifyResult) summary() string {
	if v.Err != "" {
		return "Full verification beside calls: " + v.verdict()
	}
	return fmt.Sprintf("Full verification beside calls: %d receipts verified in %s in the background (target under %s at this length, 60 s per million), ok %v; "+
		"auto-applied records.put at %d clients meanwhile: p50 %s, %.1f× its p50 alone (%s; target at most %.0f×), %d calls: %s",
		v.Receipts, v.Took.Round(100*time.Millisecond), v.budget().Round(100*time.Millisecond), v.OK,
		v.Meanwhile.Clients, fmtDur(v.Meanwhile.P50), v.slowing(), fmtDur(v.Alone.P50), verifyMaxSlowing, v.Meanwhile.Calls, v.verdict())
}
