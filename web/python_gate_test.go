package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The stdlib-only Python client (clients/python/gatehouse.py) against a
// real Gatehouse: its own test script runs a read, a write the owner
// edits, a rejection, a timeout, a refusal, a failure and a large result
// through the decorator; then what Gatehouse recorded of them. Without
// python3 the test is skipped (it fails where GATEHOUSE_TEST_REQUIRE_PYTHON
// is set, as in CI).
func TestPythonClient_GatesToolsTheAgentRunsItself(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("GATEHOUSE_TEST_REQUIRE_PYTHON") != "" {
			t.Fatal("python3 is not on PATH, and GATEHOUSE_TEST_REQUIRE_PYTHON is set (make ensure-python installs it)")
		}
		t.Skip("python3 is not on PATH: clients/python/gatehouse.py is not tested; `make ensure-python` installs it")
	}
	e, agent, owner := gateEnv(t)
	script, err := filepath.Abs("../clients/python/test_gatehouse.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), python, script, e.url, agent, owner)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // no __pycache__ in the tree
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "6 passed, 0 failed") {
		t.Fatalf("the Python client's tests: %v\n%s", err, out)
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
	} {
		if n := e.count(c.query); n != c.want {
			t.Errorf("%s: %d, want %d", c.what, n, c.want)
		}
	}
}

// gateEnv is a server with no policy file (callers declare their tools
// with their calls), an owner, their agent token and their user token.
func gateEnv(t *testing.T) (e *env, agent, owner string) {
	t.Helper()
	e = newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	return e, e.token("owner@example.com", auth.TokenAgent), e.token("owner@example.com", auth.TokenUser)
}

// ownerDecidesRefunds has the owner decide each shop.refund card as it
// appears: the first is approved (before which it must have no receipt:
// nothing ran), the second rejected. Each decision is sent in words.
func ownerDecidesRefunds(t *testing.T, e *env, owner string) <-chan string {
	t.Helper()
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
			if len(seen) == 1 {
				if receipts != 0 {
					decided <- "the refund had a receipt before its approval"
					return
				}
				resp, p := e.api("POST", "/api/v1/proposals/"+id+"/apply", owner, nil)
				decided <- fmt.Sprintf("approve %d %v", resp.StatusCode, p["status"])
			} else {
				resp, p := e.api("POST", "/api/v1/proposals/"+id+"/reject", owner, map[string]any{"reason": "999 EUR is more than the order's total"})
				decided <- fmt.Sprintf("reject %d %v", resp.StatusCode, p["status"])
			}
		}
	}()
	return decided
}

// waitForOwner checks the owner's two decisions (out and asked say what
// the agent did, when they did not come).
func waitForOwner(t *testing.T, decided <-chan string, out string, asked int) {
	t.Helper()
	for _, want := range []string{"approve 202 applying", "reject 200 rejected"} {
		select {
		case got := <-decided:
			if got != want {
				t.Fatalf("the owner's decision: %q, want %q\n%s", got, want, out)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the owner did not decide (%s); the model was asked %d times\n%s", want, asked, out)
		}
	}
}

// fakeCompletions is a tiny OpenAI-compatible chat completions endpoint
// that answers without streaming (LangChain's streaming path estimates
// token counts with an encoding it downloads, which this machine cannot):
// scripted turns in order, every request recorded.
type fakeCompletions struct {
	URL   string
	mu    sync.Mutex
	turns []fakeTurn
	reqs  []map[string]any
}

type fakeTurn struct {
	text  string
	calls []fakeCall
}

type fakeCall struct{ id, name, arguments string }

func newFakeCompletions(t *testing.T, turns ...fakeTurn) *fakeCompletions {
	t.Helper()
	f := &fakeCompletions{turns: turns}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, `{"error":{"message":"not a chat completion"}}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, body)
		if len(f.turns) == 0 {
			f.mu.Unlock()
			http.Error(w, `{"error":{"message":"no scripted turn left"}}`, http.StatusInternalServerError)
			return
		}
		turn, n := f.turns[0], len(f.reqs)
		f.turns = f.turns[1:]
		f.mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": turn.text}
		finish := "stop"
		if len(turn.calls) > 0 {
			var calls []any
			for _, c := range turn.calls {
				calls = append(calls, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.arguments}})
			}
			msg["content"], msg["tool_calls"], finish = nil, calls, "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		// Each completion its own id: LangGraph keeps one message per id.
		json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", n), "object": "chat.completion", "created": 1700000000, "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL + "/v1"
	return f
}

func (f *fakeCompletions) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.reqs...)
}

// toolResult is the content of the tool message answering id in a
// request ("" when there is none).
func toolResult(req map[string]any, id string) string {
	msgs, _ := req["messages"].([]any)
	for _, m := range msgs {
		if mm, _ := m.(map[string]any); mm["role"] == "tool" && mm["tool_call_id"] == id {
			s, _ := mm["content"].(string)
			return s
		}
	}
	return ""
}

// The Python example (examples/python/agent.py): a hand-written agent
// loop whose two tools are gated with gatehouse.py, driven by a fake
// OpenAI-compatible model; the same story as the LangGraph example's.
func TestPythonClient_ExampleAgentsWriteWaitsForTheOwnerAndARejectionReachesTheModel(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("GATEHOUSE_TEST_REQUIRE_PYTHON") != "" {
			t.Fatal("python3 is not on PATH, and GATEHOUSE_TEST_REQUIRE_PYTHON is set (make ensure-python installs it)")
		}
		t.Skip("python3 is not on PATH: examples/python is not tested; `make ensure-python` installs it")
	}
	e, agent, owner := gateEnv(t)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Python agent"})
	model := newFakeCompletions(t,
		fakeTurn{calls: []fakeCall{{"call_1", "lookup_order", `{"order":"A-1"}`}}},
		fakeTurn{calls: []fakeCall{{"call_2", "refund", `{"order":"A-1","amount":30}`}}},
		fakeTurn{calls: []fakeCall{{"call_3", "refund", `{"order":"A-1","amount":999}`}}},
		fakeTurn{text: "Refunded 30 EUR on A-1; the refund of 999 EUR was rejected."},
	)
	decided := ownerDecidesRefunds(t, e, owner)
	script, _ := filepath.Abs("../examples/python/agent.py")
	cmd := exec.CommandContext(t.Context(), python, script, "Refund order A-1.")
	cmd.Env = append(os.Environ(), "GATEHOUSE_URL="+e.url, "GATEHOUSE_TOKEN="+agent, "GATEHOUSE_CONVERSATION="+conv["id"].(string),
		"OPENAI_BASE_URL="+model.URL, "OPENAI_API_KEY=sk-fake", "OPENAI_MODEL=fake-model", "GATEHOUSE_WAIT_S=60", "PYTHONDONTWRITEBYTECODE=1")
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil {
		t.Fatalf("agent.py: %v\n%s", err, out)
	}
	waitForOwner(t, decided, out, len(model.requests()))
	var got struct {
		Ran []map[string]any `json:"ran"`
	}
	if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &got); err != nil {
		t.Fatalf("the agent's output: %v\n%s", err, out)
	}
	if ran, _ := json.Marshal(got.Ran); string(ran) != `[{"order":"A-1","tool":"lookup_order"},{"amount":30,"order":"A-1","tool":"refund"}]` {
		t.Fatalf("what the tools ran: %s", ran)
	}
	if n := e.count(`SELECT count(*) FROM proposals p WHERE tool = 'shop.refund' AND status = 'applied' AND apply_path = 'human'
		AND (SELECT count(*) FROM receipts r WHERE r.proposal_id = p.id AND r.kind = 'execution') = 1`); n != 1 {
		t.Errorf("the approved refund, recorded: %d", n)
	}
	reqs := model.requests()
	if len(reqs) != 4 {
		t.Fatalf("the model was asked %d times", len(reqs))
	}
	if r := toolResult(reqs[3], "call_3"); !strings.Contains(r, "The user rejected the call of shop.refund") || !strings.Contains(r, "999 EUR is more than the order's total") {
		t.Errorf("the rejection the model read: %s", r)
	}
}
