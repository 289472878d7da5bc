//go:build node

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// The TypeScript client (clients/typescript), the LangGraph example
// (examples/langgraph) and the OpenAI Agents SDK example
// (examples/openai-agents) against a real Gatehouse, on the Node.js that
// npm installs into each as the pinned `node` package: `make mcp-clients`
// runs `npm ci` in each, then these tests.

// nodeIn runs the Node.js installed in dir (relative to the repository)
// with args and env, in dir; it returns the combined output and fails the
// test when node fails.
func nodeIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", dir))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(abs, "node_modules", ".bin", "node")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Node.js in %s: run `make mcp-clients` (npm ci there first): %v", abs, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// The client's own suite (clients/typescript/test) through the real
// server: a read runs at once, a write waits for the owner and runs with
// their edit, a rejection, a timeout, an abort, a refusal, a failure and
// a large result; then what Gatehouse recorded of them.
func TestNode_TSClientGatesToolsTheAgentRunsItself(t *testing.T) {
	t.Parallel()
	e, agent, owner := gateEnv(t)
	out := nodeIn(t, "clients/typescript", []string{"GATEHOUSE_URL=" + e.url, "GATEHOUSE_AGENT_TOKEN=" + agent, "GATEHOUSE_OWNER_TOKEN=" + owner},
		"--test", "test/gate.test.js")
	if !strings.Contains(out, "# pass 6") || !strings.Contains(out, "# fail 0") {
		t.Fatalf("the client's suite:\n%s", out)
	}
	for _, c := range []struct {
		what, query string
		want        int
	}{
		{"reads applied, each with one execution receipt", `SELECT count(*) FROM proposals p WHERE tool = 'shop.lookup_order' AND status = 'applied'
			AND (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id AND r.kind = 'execution') = 1`, 2},
		{"the refund the owner edited, applied as edited", `SELECT count(*) FROM proposals WHERE tool = 'shop.refund' AND status = 'applied'
			AND apply_path = 'human' AND applied_arguments->>'amount' = '100' AND result->>'refunded' = '100'`, 1},
		{"the rejected refund", `SELECT count(*) FROM proposals WHERE tool = 'shop.refund' AND status = 'rejected'`, 1},
		{"the failure, reported", `SELECT count(*) FROM proposals WHERE tool = 'shop.lookup_order' AND status = 'failed' AND error = 'the shop database timed out'`, 1},
		{"the large result, as its digest", `SELECT count(*) FROM proposals WHERE tool = 'shop.lookup_order' AND length(result->>'result_digest') = 64`, 1},
		{"every refund with its own idempotency key", `SELECT count(DISTINCT key) FROM idempotency_keys WHERE tool = 'shop.refund'`, 4},
		{"nothing reported by another path", `SELECT count(*) FROM audit_events WHERE action IN ('proposal.applied', 'proposal.failed')
			AND data->>'tool' LIKE 'shop.%' AND data->>'reported_by' IS DISTINCT FROM 'caller'`, 0},
	} {
		if n := e.count(c.query); n != c.want {
			t.Errorf("%s: %d, want %d", c.what, n, c.want)
		}
	}
}

// The LangGraph example (examples/langgraph/agent.mjs): an agent whose
// two tools are wrapped with gate(), driven by a fake OpenAI-compatible
// model. The read runs at once; the first refund waits for the owner's
// approval, then runs once with its ticket and is recorded; the second is
// rejected and the model reads the rejection as the tool's error.
func TestNode_LangGraphAgentsWriteWaitsForTheOwnerAndARejectionReachesTheModel(t *testing.T) {
	t.Parallel()
	e, model, out := runRefundAgent(t, "examples/langgraph", "LangGraph")
	var got struct {
		Ran      []map[string]any `json:"ran"`
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &got); err != nil {
		t.Fatalf("the agent's output: %v\n%s", err, out)
	}
	// Each tool ran once: the read, and the approved refund only.
	if ran, _ := json.Marshal(got.Ran); string(ran) != `[{"order":"A-1","tool":"lookup_order"},{"amount":30,"order":"A-1","tool":"refund"}]` {
		t.Fatalf("what the tools ran: %s", ran)
	}
	for _, c := range []struct {
		what, query string
	}{
		{"the read, run at once", `SELECT count(*) FROM proposals WHERE tool = 'shop.lookup_order' AND status = 'applied' AND apply_path = 'auto'
			AND result->>'state' = 'delivered'`},
		{"the refund, run after the owner's approval and reported", `SELECT count(*) FROM proposals p WHERE tool = 'shop.refund' AND status = 'applied'
			AND apply_path = 'human' AND result->>'refunded' = '30' AND caller_declaration->>'effect' = 'mutate'
			AND (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id AND r.kind = 'execution') = 1
			AND (SELECT count(*) FROM audit_events a WHERE a.subject_id = p.id::text AND a.action = 'proposal.applied' AND a.data->>'reported_by' = 'caller') = 1`},
		{"the rejected refund", `SELECT count(*) FROM proposals WHERE tool = 'shop.refund' AND status = 'rejected' AND arguments->>'amount' = '999'`},
	} {
		if n := e.count(c.query); n != 1 {
			t.Errorf("%s: %d", c.what, n)
		}
	}
	// The model read the read's result, then the rejection in the words of
	// GatehouseRejected.
	reqs := model.requests()
	if len(reqs) != 4 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	if r := toolResult(reqs[1], "call_1"); !strings.Contains(r, `"state":"delivered"`) {
		t.Errorf("the lookup's result: %s", r)
	}
	if r := toolResult(reqs[2], "call_2"); !strings.Contains(r, `"refunded":30`) {
		t.Errorf("the refund's result: %s", r)
	}
	if r := toolResult(reqs[3], "call_3"); !strings.Contains(r, "The user rejected the call of shop.refund") || !strings.Contains(r, "999 EUR is more than the order's total") {
		t.Errorf("the rejection the model read: %s", r)
	}
}

// The OpenAI Agents SDK example (examples/openai-agents/agent.mjs): the
// same two tools wrapped with gate(), as the SDK's function tools, on a
// Chat Completions model at the fake endpoint with tracing off. The read
// runs at once; the first refund runs once only after the owner approves
// its card in the browser and is recorded; the second is rejected and the
// model reads the rejection as the tool's output.
func TestNode_OpenAIAgentsWriteWaitsForTheOwnerAndARejectionReachesTheModel(t *testing.T) {
	t.Parallel()
	e, model, out := runRefundAgent(t, "examples/openai-agents", "OpenAI Agents")
	var got struct {
		Ran   []map[string]any `json:"ran"`
		Final string           `json:"final"`
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &got); err != nil {
		t.Fatalf("the agent's output: %v\n%s", err, out)
	}
	// Each tool ran once: the read, and the approved refund only.
	if ran, _ := json.Marshal(got.Ran); string(ran) != `[{"order":"A-1","tool":"lookup_order"},{"amount":30,"order":"A-1","tool":"refund"}]` {
		t.Fatalf("what the tools ran: %s", ran)
	}
	if got.Final != "Refunded 30 EUR on A-1; the refund of 999 EUR was rejected." {
		t.Errorf("the agent's final output: %q", got.Final)
	}
	for _, c := range []struct {
		what, query string
	}{
		{"the read, run at once", `SELECT count(*) FROM proposals WHERE tool = 'shop.lookup_order' AND status = 'applied' AND apply_path = 'auto'
			AND result->>'state' = 'delivered'`},
		{"the refund, run after the owner's approval and reported", `SELECT count(*) FROM proposals p WHERE tool = 'shop.refund' AND status = 'applied'
			AND apply_path = 'human' AND result->>'refunded' = '30' AND caller_declaration->>'effect' = 'mutate'
			AND (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id AND r.kind = 'execution') = 1
			AND (SELECT count(*) FROM audit_events a WHERE a.subject_id = p.id::text AND a.action = 'proposal.applied' AND a.data->>'reported_by' = 'caller') = 1`},
		{"the rejected refund", `SELECT count(*) FROM proposals WHERE tool = 'shop.refund' AND status = 'rejected' AND arguments->>'amount' = '999'`},
	} {
		if n := e.count(c.query); n != 1 {
			t.Errorf("%s: %d", c.what, n)
		}
	}
	// The model was asked over Chat Completions without streaming, saw
	// both tools, read the read's result, then the rejection in the words
	// of GatehouseRejected.
	reqs := model.requests()
	if len(reqs) != 4 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	if reqs[0]["model"] != "fake-model" || reqs[0]["stream"] == true {
		t.Errorf("the first request: model %v, stream %v", reqs[0]["model"], reqs[0]["stream"])
	}
	if tools, _ := reqs[0]["tools"].([]any); len(tools) != 2 {
		t.Errorf("the tools the model was offered: %v", reqs[0]["tools"])
	}
	if r := toolResult(reqs[1], "call_1"); !strings.Contains(r, `"state":"delivered"`) {
		t.Errorf("the lookup's result: %s", r)
	}
	if r := toolResult(reqs[2], "call_2"); !strings.Contains(r, `"refunded":30`) {
		t.Errorf("the refund's result: %s", r)
	}
	if r := toolResult(reqs[3], "call_3"); !strings.Contains(r, "The user rejected the call of shop.refund") || !strings.Contains(r, "999 EUR is more than the order's total") {
		t.Errorf("the rejection the model read: %s", r)
	}
}

// runRefundAgent runs the example agent in dir (its agent.mjs) against a
// real server, in a new conversation titled title, with the fake model
// asking for a lookup, a refund of 30 and one of 999, while the owner
// approves the first refund and rejects the second in Chromium. It
// returns the server, the model and the agent's output once both
// decisions came. Not CookieSecure: the owner's browser reaches the
// server over plain http.
func runRefundAgent(t *testing.T, dir, title string) (*env, *fakeCompletions, string) {
	t.Helper()
	e := newEnvConfig(t, dbtest.MustPool(t), builtinRegistry(t), web.Config{})
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": title})
	convID := conv["id"].(string)
	model := newFakeCompletions(t,
		fakeTurn{calls: []fakeCall{{"call_1", "lookup_order", `{"order":"A-1"}`}}},
		fakeTurn{calls: []fakeCall{{"call_2", "refund", `{"order":"A-1","amount":30}`}}},
		fakeTurn{calls: []fakeCall{{"call_3", "refund", `{"order":"A-1","amount":999}`}}},
		fakeTurn{text: "Refunded 30 EUR on A-1; the refund of 999 EUR was rejected."},
	)

	decided := ownerDecidesRefundsInTheBrowser(t, e, convID)

	out := nodeIn(t, dir, []string{"GATEHOUSE_URL=" + e.url, "GATEHOUSE_TOKEN=" + agent, "GATEHOUSE_CONVERSATION=" + convID,
		"OPENAI_BASE_URL=" + model.URL, "OPENAI_API_KEY=sk-fake", "OPENAI_MODEL=fake-model", "GATEHOUSE_WAIT_MS=60000"}, "agent.mjs", "Refund order A-1.")
	waitForOwner(t, decided, out, len(model.requests()))
	return e, model, out
}

// builtinRegistry is the built-in tools.
func builtinRegistry(t *testing.T) *tools.Registry {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ownerDecidesRefundsInTheBrowser is ownerDecidesRefunds done as a person
// does it: signed in in Chromium, on the conversation's page, the owner
// approves the first shop.refund card (which must have no receipt
// before: nothing ran) and rejects the second with a reason, by clicking
// the cards' buttons.
func ownerDecidesRefundsInTheBrowser(t *testing.T, e *env, convID string) <-chan string {
	t.Helper()
	b := chromium(t)
	browserStep(t, b, "sign in as the owner",
		chromedp.Navigate(e.url+"/signin"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=email]`), "owner@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`input[name=password]`)),
	)
	decided := make(chan string, 2)
	go func() {
		seen := map[string]bool{}
		for len(seen) < 2 {
			select {
			case <-t.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			var id string
			var receipts int
			err := e.pool.QueryRow(t.Context(), `SELECT p.id::text, (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id)
				FROM proposals p WHERE p.tool = 'shop.refund' AND p.status = 'pending' ORDER BY p.created_at LIMIT 1`).Scan(&id, &receipts)
			if err != nil || seen[id] {
				continue
			}
			seen[id] = true
			card := "#proposal-" + id
			ctx, cancel := context.WithTimeout(b, 20*time.Second)
			var status string
			if len(seen) == 1 {
				if receipts != 0 {
					cancel()
					decided <- "the refund had a receipt before its approval"
					return
				}
				err = chromedp.Do(ctx, chromedp.Navigate(e.url+"/conversations/"+convID),
					chromedp.WaitVisible(chromedp.CSS(card+` [data-testid=approve]`)),
					chromedp.Click(chromedp.CSS(card+` [data-testid=approve]`)),
					chromedp.WaitNotPresent(chromedp.CSS(card+` [data-testid=approve]`)))
				e.pool.QueryRow(t.Context(), `SELECT status FROM proposals WHERE id = $1`, id).Scan(&status)
				if err == nil && (status == "applying" || status == "applied") { // applied once the agent reported
					decided <- "approve 202 applying" // in waitForOwner's words
				} else {
					decided <- fmt.Sprintf("approve in the browser: %v, status %s", err, status)
				}
			} else {
				err = chromedp.Do(ctx, chromedp.Navigate(e.url+"/conversations/"+convID),
					chromedp.WaitVisible(chromedp.CSS(card+` [data-testid=reject-reason]`)),
					chromedp.SendKeys(chromedp.CSS(card+` [data-testid=reject-reason]`), "999 EUR is more than the order's total"),
					chromedp.Click(chromedp.CSS(card+` [data-testid=reject]`)),
					chromedp.WaitNotPresent(chromedp.CSS(card+` [data-testid=reject]`)))
				e.pool.QueryRow(t.Context(), `SELECT status FROM proposals WHERE id = $1`, id).Scan(&status)
				if err == nil && status == "rejected" {
					decided <- "reject 200 rejected"
				} else {
					decided <- fmt.Sprintf("reject in the browser: %v, status %s", err, status)
				}
			}
			cancel()
		}
	}()
	return decided
}
