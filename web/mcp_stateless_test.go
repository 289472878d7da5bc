package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// statelessClient connects the SDK's client as it connects by default
// (the 2026-07-28 revision: server/discover, no session), to base with
// token; opts may declare URL elicitation or turn the automatic retry off.
func statelessClient(t *testing.T, base, token, client string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return connectAt(t, base, token, client, opts, nil)
}

// A client of the stateless revision (2026-07-28) works without a session,
// on any instance: it discovers Gatehouse (the instructions say where its
// calls go), lists and calls, and its calls land in one conversation of
// its token for its client name, whichever instance each request reaches
// and however many times it connects; another client name gets its own.
// No instance holds anything for it.
func TestMCPStateless_CallsWithoutASessionLandInTheTokensConversation(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	balancer := newRoundRobin(t, a.url, b.url)

	s := statelessClient(t, balancer, agent, "agent-sdk", nil)
	init := s.InitializeResult()
	if s.ID() != "" || init.ProtocolVersion != "2026-07-28" || !strings.Contains(init.Instructions, `one conversation of its token, "MCP: agent-sdk"`) {
		t.Fatalf("session %q, protocol %q, instructions %q", s.ID(), init.ProtocolVersion, init.Instructions)
	}
	if _, err := s.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res, text := callTool(t, s, "records.search", map[string]any{"query": "acme", "rationale": "find the customer's record"}); res.IsError {
			t.Fatal(text)
		}
	}
	again := statelessClient(t, balancer, agent, "agent-sdk", nil)
	callTool(t, again, "records.search", map[string]any{"query": "beta", "rationale": "find another record"})
	other := statelessClient(t, balancer, agent, "other-agent", nil)
	callTool(t, other, "records.search", map[string]any{"query": "gamma", "rationale": "find a third record"})

	rows, err := a.pool.Query(t.Context(), `SELECT c.title, count(p.id) FROM conversations c JOIN proposals p ON p.conversation_id = c.id GROUP BY c.title ORDER BY c.title`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var title string
		var n int
		if err := rows.Scan(&title, &n); err != nil {
			t.Fatal(err)
		}
		got[title] = n
	}
	if len(got) != 2 || got["MCP: agent-sdk"] != 3 || got["MCP: other-agent"] != 1 {
		t.Fatalf("calls by conversation: %v; want 3 in MCP: agent-sdk and 1 in MCP: other-agent", got)
	}
	if a.srv.MCPLiveSessions()+b.srv.MCPLiveSessions() != 0 {
		t.Fatal("an instance holds a session of a stateless client")
	}
}

// A call that waits for the owner answers the stateless revision's
// input-required result: a URL elicitation pointing at the card, and a
// sealed requestState. The retry with that state reads the call: input
// required again (a new state) while it waits, its outcome once decided.
// A state is single use, and one altered, sent by another token or for
// other arguments does nothing and says why.
func TestMCPStateless_AHeldCallAsksForTheDecisionAndItsRetryReadsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("other@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	stranger := e.token("other@example.com", auth.TokenAgent)
	elicitsURL := &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
		MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
	}
	s := statelessClient(t, e.url, agent, "agent-sdk", elicitsURL)
	args := map[string]any{"collection": "crm", "key": "acme", "value": map[string]any{"tier": "gold"}, "rationale": "record the customer's tier"}
	call := func(s *sdk.ClientSession, args map[string]any, state string) *sdk.CallToolResult {
		t.Helper()
		res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: "records.put", Arguments: args, RequestState: state})
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return res
	}
	res := call(s, args, "")
	el, _ := res.InputRequests["gatehouse/decision"].(*sdk.ElicitParams)
	if !res.NeedsInput() || el == nil || el.Mode != "url" || !strings.HasPrefix(el.URL, e.url+"/conversations/") || el.ElicitationID == "" || res.RequestState == "" || len(res.Content) != 0 {
		t.Fatalf("a held call under 2026-07-28: %+v (elicitation %+v)", res, el)
	}
	id := el.ElicitationID
	first := res.RequestState

	// Still waiting: input required again, with a new state.
	res = call(s, args, first)
	if !res.NeedsInput() || res.RequestState == "" || res.RequestState == first {
		t.Fatalf("the retry of a call that still waits: %+v", res)
	}
	latest := res.RequestState
	refused := func(what string, res *sdk.CallToolResult, why string) {
		t.Helper()
		if data, _ := res.StructuredContent.(map[string]any); !res.IsError || data["code"] != "invalid_request_state" || !strings.Contains(data["message"].(string), why) {
			t.Errorf("%s: %+v", what, res.StructuredContent)
		}
	}
	refused("a state used before", call(s, args, first), "used before")
	refused("an altered state", call(s, args, latest[:len(latest)-2]+"AA"), "altered")
	changed := map[string]any{"collection": "crm", "key": "acme", "value": map[string]any{"tier": "platinum"}, "rationale": "record the customer's tier"}
	refused("a state for other arguments", call(s, changed, latest), "another call")
	refused("another token's retry", call(statelessClient(t, e.url, stranger, "agent-sdk", elicitsURL), args, latest), "another caller")

	// The owner confirms; the retry with the latest state reads the outcome.
	if resp, p := e.api("POST", "/api/v1/proposals/"+id+"/apply", owner, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %d %v", resp.StatusCode, p)
	}
	res = call(s, args, latest)
	if data, _ := res.StructuredContent.(map[string]any); res.NeedsInput() || res.IsError || data["status"] != "applied" || data["proposal_id"] != id {
		t.Fatalf("the retry after the owner confirmed: %+v", res)
	}
	var proposals int
	if err := e.pool.QueryRow(t.Context(), `SELECT count(*) FROM proposals WHERE tool = 'records.put'`).Scan(&proposals); err != nil || proposals != 1 {
		t.Fatalf("%d proposals (%v): the retries proposed the call again", proposals, err)
	}
}

// With the SDK's automatic multi-round trip, a client that opens the URL
// for its person (here: the owner confirms when it is asked) gets the
// call's outcome from one CallTool; a client that cannot open a URL gets
// the pending result and check_proposal, as under 2025-11-25.
func TestMCPStateless_TheSDKsRetryLoopEndsWithTheOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	asked := 0
	s := statelessClient(t, e.url, agent, "agent-sdk", &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked++
			// The person opens the card and confirms.
			if resp, p := e.api("POST", "/api/v1/proposals/"+req.Params.ElicitationID+"/apply", owner, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("apply: %d %v", resp.StatusCode, p)
			}
			return &sdk.ElicitResult{Action: "accept"}, nil
		},
	})
	res, text := callTool(t, s, "records.put", map[string]any{"collection": "crm", "key": "acme", "value": map[string]any{"tier": "gold"}, "rationale": "record the customer's tier"})
	if data := structured(t, res); res.IsError || data["status"] != "applied" || asked != 1 {
		t.Fatalf("after the person confirmed: %s (asked %d times)", text, asked)
	}

	plain := statelessClient(t, e.url, agent, "plain-agent", nil)
	res, text = callTool(t, plain, "records.put", map[string]any{"collection": "crm", "key": "beta", "value": map[string]any{"tier": "silver"}, "rationale": "record another customer's tier"})
	if data := structured(t, res); res.NeedsInput() || data["status"] != "pending" || data["confirm_url"] == nil {
		t.Fatalf("a client that cannot open a URL: %s", text)
	}
}
