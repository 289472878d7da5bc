package chat_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/chat"
	"github.com/gatehouse/gatehouse/internal/chat/chattest"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const apiKey = "sk-test-secret-key-never-shown"

type fixture struct {
	pool  *pgxpool.Pool
	convs *conversations.Service
	props *proposals.Service
	owner auth.Principal
	model *chattest.Model
	conv  uuid.UUID
}

func newFixture(t *testing.T, script ...chattest.Response) *fixture {
	t.Helper()
	ctx := context.Background()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.MustPool(t)
	a := auth.NewService(pool, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	ws, err := a.EnsureDefaultWorkspace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateUser(ctx, ws, "owner@example.com", "a long enough password", auth.RoleMember); err != nil {
		t.Fatal(err)
	}
	tok, err := a.CreateToken(ctx, "owner@example.com", auth.TokenUser, "script")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := a.AuthenticateToken(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pool: pool, convs: conversations.NewService(pool), props: proposals.NewService(pool, registry, slog.New(slog.DiscardHandler)),
		owner: owner, model: chattest.New(t, script...)}
	conv, err := f.convs.Create(ctx, owner, "chat")
	if err != nil {
		t.Fatal(err)
	}
	f.conv = conv.ID
	return f
}

// instance is one server instance's chat service; it closes with the test.
func (f *fixture) instance(t *testing.T) *chat.Service {
	t.Helper()
	s := chat.NewService(chat.Config{BaseURL: f.model.URL, APIKey: apiKey, Model: "fake-model", Models: []string{"other-model"}, Lease: 30 * time.Second},
		f.pool, f.props, nil, slog.New(slog.DiscardHandler))
	t.Cleanup(s.Close)
	return s
}

func (f *fixture) setMode(t *testing.T, mode string) {
	t.Helper()
	if _, err := f.convs.Update(context.Background(), f.owner, f.conv, conversations.Update{PermissionMode: &mode}); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the turn is no longer running (it is done, waits, or
// failed) and returns it.
func (f *fixture) settle(t *testing.T, s *chat.Service, id uuid.UUID) chat.Turn {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		turn, err := s.Get(context.Background(), f.owner, f.conv, id)
		if err != nil {
			t.Fatal(err)
		}
		if turn.State != chat.StateRunning {
			return turn
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn still running: %+v", turn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) start(t *testing.T, s *chat.Service, text string) chat.Turn {
	t.Helper()
	st, err := s.Start(context.Background(), f.owner, f.conv, text)
	if err != nil {
		t.Fatal(err)
	}
	return f.settle(t, s, st.Turn.ID)
}

func (f *fixture) transcript(t *testing.T) []conversations.Message {
	t.Helper()
	page, err := f.convs.Messages(context.Background(), f.owner, f.conv, conversations.Range{Limit: conversations.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	return page.Messages
}

func (f *fixture) proposal(t *testing.T, id uuid.UUID) proposals.Proposal {
	t.Helper()
	p, err := f.props.Get(context.Background(), f.owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantState(t *testing.T, turn chat.Turn, want chat.State) {
	t.Helper()
	if turn.State != want {
		t.Fatalf("turn state = %s (error %q), want %s", turn.State, turn.Error, want)
	}
}

func put(id, key, rationale string) chattest.Call {
	args, _ := json.Marshal(map[string]any{"collection": "notes", "key": key, "value": map[string]any{"text": "hello " + key}, "rationale": rationale})
	return chattest.Call{ID: id, Name: "records_put", Arguments: string(args)}
}

func TestTurn_AutoRunReadGoesBackToTheModel(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Text: []string{"Let me ", "look."}, Calls: []chattest.Call{{ID: "call_1", Name: "records_search",
			Arguments: `{"query":"invoice","rationale":"The user asked which invoices we have on record."}`}}, PromptTokens: 100, CompletionTokens: 20},
		chattest.Response{Text: []string{"There are ", "no invoices."}, PromptTokens: 150, CompletionTokens: 10},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Which invoices do we have?")
	wantState(t, turn, chat.StateDone)
	if turn.PromptTokens != 250 || turn.CompletionTokens != 30 {
		t.Fatalf("tokens = %d + %d, want 250 + 30", turn.PromptTokens, turn.CompletionTokens)
	}
	reqs := f.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	first := reqs[0]
	if first.Authorization != "Bearer "+apiKey || first.Body["stream"] != true || first.Body["model"] != "fake-model" {
		t.Fatalf("first request: auth %q, stream %v, model %v", first.Authorization, first.Body["stream"], first.Body["model"])
	}
	if so, _ := first.Body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options = %v, want include_usage", first.Body["stream_options"])
	}
	// Every tool offered requires a rationale.
	offered, _ := first.Body["tools"].([]any)
	if len(offered) == 0 {
		t.Fatal("no tools offered")
	}
	for _, o := range offered {
		fn := o.(map[string]any)["function"].(map[string]any)
		params := fn["parameters"].(map[string]any)
		req, _ := params["required"].([]any)
		found := false
		for _, r := range req {
			found = found || r == "rationale"
		}
		if !found || params["properties"].(map[string]any)["rationale"] == nil {
			t.Fatalf("tool %v does not require a rationale: %v", fn["name"], params)
		}
	}
	msgs := first.Messages()
	if last := msgs[len(msgs)-1]; last["role"] != "user" || last["content"] != "Which invoices do we have?" {
		t.Fatalf("last message sent = %v", last)
	}
	res, ok := reqs[1].ToolResult("call_1")
	if !ok || res["status"] != "applied" {
		t.Fatalf("tool result sent back = %v (%v)", res, ok)
	}
	// The call went through the gate as the owner's model agent.
	if len(turn.Calls) != 1 || turn.Calls[0].ProposalID == uuid.Nil {
		t.Fatalf("calls = %+v", turn.Calls)
	}
	p := f.proposal(t, turn.Calls[0].ProposalID)
	if p.ProposedBy != "agent" || p.Status != proposals.StatusApplied || p.ApplyPath != proposals.PathAuto || p.Rationale != "The user asked which invoices we have on record." {
		t.Fatalf("proposal = %+v", p)
	}
	var tokenName string
	if err := f.pool.QueryRow(context.Background(), `SELECT t.name FROM proposals p JOIN api_tokens t ON t.id = p.proposed_by_token_id WHERE p.id = $1`, p.ID).Scan(&tokenName); err != nil {
		t.Fatal(err)
	}
	if tokenName != "model (fake-model)" {
		t.Fatalf("proposed by token %q", tokenName)
	}
	// The transcript: the user, the model's words, the call's card line, the answer.
	var lines []string
	for _, m := range f.transcript(t) {
		lines = append(lines, m.Role+":"+m.Content)
	}
	want := []string{"user:Which invoices do we have?", "assistant:Let me look.", "tool:records.search", "assistant:There are no invoices."}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("transcript = %q, want %q", lines, want)
	}
}

func TestTurn_MutateInApproveModePausesAndResumesAfterApproval(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
		chattest.Response{Text: []string{"Saved."}},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Save a note")
	wantState(t, turn, chat.StateWaiting)
	if len(turn.Calls) != 1 || turn.Calls[0].Status != proposals.StatusPending {
		t.Fatalf("calls = %+v", turn.Calls)
	}
	if n := s.Sweep(context.Background()); n != 0 {
		t.Fatalf("a turn whose call waits was resumed (%d)", n)
	}
	if _, err := f.props.Apply(context.Background(), f.owner, turn.Calls[0].ProposalID, nil); err != nil {
		t.Fatal(err)
	}
	if n := s.Sweep(context.Background()); n != 1 {
		t.Fatalf("resumed %d turns, want 1", n)
	}
	turn = f.settle(t, s, turn.ID)
	wantState(t, turn, chat.StateDone)
	reqs := f.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if res, _ := reqs[1].ToolResult("call_put"); res["status"] != "applied" {
		t.Fatalf("result = %v", res)
	}
}

func TestTurn_MutateInAutoModeAppliesAtOnce(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
		chattest.Response{Text: []string{"Saved."}},
	)
	f.setMode(t, "auto")
	s := f.instance(t)
	turn := f.start(t, s, "Save a note")
	wantState(t, turn, chat.StateDone)
	p := f.proposal(t, turn.Calls[0].ProposalID)
	if p.Status != proposals.StatusApplied || p.ApplyPath != proposals.PathAuto {
		t.Fatalf("proposal = %s via %s", p.Status, p.ApplyPath)
	}
	if res, _ := f.model.Requests()[1].ToolResult("call_put"); res["status"] != "applied" {
		t.Fatalf("result = %v", res)
	}
}

func TestTurn_DestructiveCallWaitsInBothModes(t *testing.T) {
	for _, mode := range []string{"approve", "auto"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, chattest.Response{Calls: []chattest.Call{{ID: "call_del", Name: "records_delete",
				Arguments: `{"collection":"notes","key":"a","rationale":"The user asked me to delete this note."}`}}})
			f.setMode(t, mode)
			s := f.instance(t)
			turn := f.start(t, s, "Delete note a")
			wantState(t, turn, chat.StateWaiting)
			// records.delete is high risk (ADR-036): it waits for an approver.
			if p := f.proposal(t, turn.Calls[0].ProposalID); p.Status != proposals.StatusPendingApproval {
				t.Fatalf("destructive call is %s in %s mode", p.Status, mode)
			}
		})
	}
}

func TestTurn_ParallelCallsResolvedInOppositeOrderAreMatched(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Text: []string{"Saving both."}, Calls: []chattest.Call{
			put("call_a", "a", "The user asked me to save note a."),
			put("call_b", "b", "The user asked me to save note b."),
		}},
		chattest.Response{Text: []string{"One saved, one rejected."}},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Save notes a and b")
	wantState(t, turn, chat.StateWaiting)
	if len(turn.Calls) != 2 {
		t.Fatalf("calls = %+v", turn.Calls)
	}
	byCall := map[string]uuid.UUID{}
	for _, c := range turn.Calls {
		byCall[c.ToolCallID] = c.ProposalID
	}
	ctx := context.Background()
	// b first: the turn still waits for a.
	if _, err := f.props.Apply(ctx, f.owner, byCall["call_b"], nil); err != nil {
		t.Fatal(err)
	}
	if n := s.Sweep(ctx); n != 0 {
		t.Fatalf("resumed with a call still pending (%d)", n)
	}
	if _, err := f.props.Reject(ctx, f.owner, byCall["call_a"], "Not that collection, use drafts"); err != nil {
		t.Fatal(err)
	}
	if n := s.Sweep(ctx); n != 1 {
		t.Fatalf("resumed %d", n)
	}
	wantState(t, f.settle(t, s, turn.ID), chat.StateDone)
	second := f.model.Requests()[1]
	a, _ := second.ToolResult("call_a")
	b, _ := second.ToolResult("call_b")
	if a["status"] != "rejected" || a["reason"] != "Not that collection, use drafts" {
		t.Fatalf("call_a result = %v", a)
	}
	if b["status"] != "applied" {
		t.Fatalf("call_b result = %v", b)
	}
	// The tool results follow the assistant message that made both calls,
	// in the calls' order.
	msgs := second.Messages()
	n := len(msgs)
	if msgs[n-3]["role"] != "assistant" || msgs[n-2]["tool_call_id"] != "call_a" || msgs[n-1]["tool_call_id"] != "call_b" {
		t.Fatalf("last messages = %v", msgs[n-3:])
	}
	calls, _ := msgs[n-3]["tool_calls"].([]any)
	if len(calls) != 2 {
		t.Fatalf("assistant tool_calls = %v", msgs[n-3])
	}
}

func TestTurn_RejectionReasonReachesTheModel(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
		chattest.Response{Text: []string{"Understood, I will not save it."}},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Save a note")
	wantState(t, turn, chat.StateWaiting)
	if _, err := f.props.Reject(context.Background(), f.owner, turn.Calls[0].ProposalID, "We keep notes elsewhere"); err != nil {
		t.Fatal(err)
	}
	s.Sweep(context.Background())
	wantState(t, f.settle(t, s, turn.ID), chat.StateDone)
	res, _ := f.model.Requests()[1].ToolResult("call_put")
	if res["status"] != "rejected" || res["reason"] != "We keep notes elsewhere" {
		t.Fatalf("result = %v", res)
	}
	msgs := f.transcript(t)
	if last := msgs[len(msgs)-1]; last.Content != "Understood, I will not save it." {
		t.Fatalf("last line = %+v", last)
	}
}

func TestTurn_ModelErrorIsShownInTheTranscript(t *testing.T) {
	f := newFixture(t, chattest.Response{Status: http.StatusServiceUnavailable, ErrorMessage: "the model is overloaded"})
	s := f.instance(t)
	turn := f.start(t, s, "Hello")
	wantState(t, turn, chat.StateFailed)
	msgs := f.transcript(t)
	last := msgs[len(msgs)-1]
	if last.Role != "notice" || !strings.Contains(last.Content, "503") || !strings.Contains(last.Content, "the model is overloaded") {
		t.Fatalf("last line = %+v", last)
	}
	for _, m := range msgs {
		if strings.Contains(m.Content, apiKey) {
			t.Fatal("the API key is in the transcript")
		}
	}
	if !strings.Contains(turn.Error, "503") {
		t.Fatalf("turn error = %q", turn.Error)
	}
}

func TestTurn_MalformedUnknownAndInvalidCallsGoBackToTheModel(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{
			{ID: "call_json", Name: "records_put", Arguments: `{"collection": "notes", "key": `},
			{ID: "call_unknown", Name: "shell_exec", Arguments: `{"cmd":"rm -rf /","rationale":"Cleaning up the disk for the user."}`},
			{ID: "call_schema", Name: "records_put", Arguments: `{"collection":"no spaces allowed","key":"a","value":{},"rationale":"The user asked me to save it."}`},
			{ID: "call_rationale", Name: "records_search", Arguments: `{"query":"x"}`},
		}},
		chattest.Response{Text: []string{"Sorry, I could not do that."}},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Do things")
	wantState(t, turn, chat.StateDone)
	second := f.model.Requests()[1]
	for id, want := range map[string]string{"call_json": "JSON object", "call_unknown": "No tool is named", "call_schema": "arguments.collection", "call_rationale": "rationale"} {
		res, ok := second.ToolResult(id)
		b, _ := json.Marshal(res)
		if !ok || res["status"] != "invalid" || !strings.Contains(string(b), want) {
			t.Fatalf("%s: result %s, want invalid mentioning %q", id, b, want)
		}
	}
	// Nothing reached effect.
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM proposals`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d proposals (%v)", n, err)
	}
}

func TestTurn_ToolCallLimitStopsTheTurn(t *testing.T) {
	var calls []chattest.Call
	for i := 0; i < 21; i++ {
		calls = append(calls, chattest.Call{ID: "call_" + string(rune('a'+i)), Name: "records_search", Arguments: `{"query":"x","rationale":"Looking again for the user."}`})
	}
	f := newFixture(t, chattest.Response{Calls: calls})
	s := f.instance(t)
	turn := f.start(t, s, "Search a lot")
	wantState(t, turn, chat.StateStopped)
	if len(turn.Calls) != 0 || !strings.Contains(turn.Error, "more than 20 tool calls") {
		t.Fatalf("turn = %+v", turn)
	}
}

func TestTurn_StreamedTextShowsAndStopEndsTheTurn(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, chattest.Response{Text: []string{"Hel", "lo"}, Hold: hold})
	s := f.instance(t)
	st, err := s.Start(context.Background(), f.owner, f.conv, "Hi")
	if err != nil {
		t.Fatal(err)
	}
	// The text so far is on the turn (for every instance's page) before
	// the answer ends.
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur, err := s.Get(context.Background(), f.owner, f.conv, st.Turn.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Streaming == "Hel" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("streaming = %q", cur.Streaming)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A stop while it streams ends it; what was said stays.
	turn, err := s.Stop(context.Background(), f.owner, f.conv, st.Turn.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, turn, chat.StateStopped)
	close(hold)
	if _, err := s.Stop(context.Background(), f.owner, f.conv, st.Turn.ID); err == nil {
		t.Fatal("a second stop succeeded")
	}
	msgs := f.transcript(t)
	if n := len(msgs); msgs[n-2].Role != "assistant" || msgs[n-2].Content != "Hel" || msgs[n-1].Role != "notice" || !strings.Contains(msgs[n-1].Content, "stopped") {
		t.Fatalf("last lines = %+v", msgs[n-2:])
	}
	if n := len(f.model.Requests()); n != 1 {
		t.Fatalf("model asked %d times", n)
	}
}

func TestTurn_TokenBudgetStopsTheTurn(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{{ID: "call_1", Name: "records_search", Arguments: `{"query":"x","rationale":"Looking it up for the user."}`}},
			PromptTokens: 900, CompletionTokens: 200},
	)
	s := f.instance(t)
	if _, err := s.SetSettings(context.Background(), f.owner, f.conv, chat.Settings{Budget: 1000}); err != nil {
		t.Fatal(err)
	}
	turn := f.start(t, s, "Look it up")
	wantState(t, turn, chat.StateStopped)
	if len(turn.Calls) != 0 || !strings.Contains(turn.Error, "budget") {
		t.Fatalf("turn = %+v", turn)
	}
	if _, err := s.Start(context.Background(), f.owner, f.conv, "Again"); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Fatalf("a turn over budget started: %v", err)
	}
	panel, err := s.Panel(context.Background(), f.owner, f.conv)
	if err != nil || panel.Tokens != 1100 {
		t.Fatalf("panel tokens = %d (%v)", panel.Tokens, err)
	}
}

func TestTurn_ResumedAfterARestart(t *testing.T) {
	t.Run("card approved while the server was down", func(t *testing.T) {
		f := newFixture(t,
			chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
			chattest.Response{Text: []string{"Saved after the restart."}},
		)
		first := f.instance(t)
		turn := f.start(t, first, "Save a note")
		wantState(t, turn, chat.StateWaiting)
		first.Close()
		if _, err := f.props.Apply(context.Background(), f.owner, turn.Calls[0].ProposalID, nil); err != nil {
			t.Fatal(err)
		}
		second := f.instance(t)
		if n := second.Sweep(context.Background()); n != 1 {
			t.Fatalf("resumed %d", n)
		}
		wantState(t, f.settle(t, second, turn.ID), chat.StateDone)
		if res, _ := f.model.Requests()[1].ToolResult("call_put"); res["status"] != "applied" {
			t.Fatalf("result = %v", res)
		}
	})
	t.Run("running turn of a stopped instance", func(t *testing.T) {
		hold, started := make(chan struct{}), make(chan struct{})
		defer close(hold)
		f := newFixture(t,
			chattest.Response{Text: []string{"never finished"}, Hold: hold, Started: started},
			chattest.Response{Text: []string{"Answered by the second instance."}, PromptTokens: 10, CompletionTokens: 5},
		)
		first := f.instance(t)
		st, err := first.Start(context.Background(), f.owner, f.conv, "Hello")
		if err != nil {
			t.Fatal(err)
		}
		<-started
		second := f.instance(t)
		if n := second.Sweep(context.Background()); n != 0 {
			t.Fatal("a turn under a live lease was taken over")
		}
		first.Close() // the instance stops mid-answer; its lease ends
		if n := second.Sweep(context.Background()); n != 1 {
			t.Fatalf("resumed %d", n)
		}
		turn := f.settle(t, second, st.Turn.ID)
		wantState(t, turn, chat.StateDone)
		reqs := f.model.Requests()
		if len(reqs) != 2 || len(reqs[0].Messages()) != len(reqs[1].Messages()) {
			t.Fatalf("requests = %d", len(reqs))
		}
		msgs := f.transcript(t)
		if last := msgs[len(msgs)-1]; last.Content != "Answered by the second instance." {
			t.Fatalf("last = %+v", last)
		}
	})
}

func TestTurn_TwoInstancesNeverBothResume(t *testing.T) {
	for i := 0; i < 5; i++ {
		f := newFixture(t,
			chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
			chattest.Response{Text: []string{"Saved."}},
		)
		first := f.instance(t)
		turn := f.start(t, first, "Save a note")
		wantState(t, turn, chat.StateWaiting)
		if _, err := f.props.Apply(context.Background(), f.owner, turn.Calls[0].ProposalID, nil); err != nil {
			t.Fatal(err)
		}
		a, b := f.instance(t), f.instance(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed := 0
		gate := make(chan struct{})
		for _, s := range []*chat.Service{a, b, first} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				n := s.Sweep(context.Background())
				mu.Lock()
				claimed += n
				mu.Unlock()
			}()
		}
		close(gate)
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("the turn was claimed %d times", claimed)
		}
		wantState(t, f.settle(t, a, turn.ID), chat.StateDone)
		if n := len(f.model.Requests()); n != 2 {
			t.Fatalf("model got %d requests, want 2", n)
		}
	}
}

func TestStart_RefusesAgentsAndUnconfigured(t *testing.T) {
	f := newFixture(t)
	s := f.instance(t)
	agent := f.owner
	agent.TokenKind = auth.TokenAgent
	if _, err := s.Start(context.Background(), agent, f.conv, "hi"); err == nil {
		t.Fatal("an agent started a turn")
	}
	off := chat.NewService(chat.Config{}, f.pool, f.props, nil, slog.New(slog.DiscardHandler))
	defer off.Close()
	if _, err := off.Start(context.Background(), f.owner, f.conv, "hi"); err != chat.ErrNoModel {
		t.Fatalf("err = %v", err)
	}
}

func TestTurn_RevokedModelAgentStopsTheTurn(t *testing.T) {
	f := newFixture(t,
		chattest.Response{Calls: []chattest.Call{put("call_put", "a", "The user asked me to save this note.")}},
		chattest.Response{Calls: []chattest.Call{put("call_put2", "b", "The user asked me to save another note.")}},
	)
	s := f.instance(t)
	turn := f.start(t, s, "Save a note")
	wantState(t, turn, chat.StateWaiting)
	ctx := context.Background()
	if _, err := f.pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE name = 'model (fake-model)'`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.props.Apply(ctx, f.owner, turn.Calls[0].ProposalID, nil); err != nil {
		t.Fatal(err)
	}
	s.Sweep(ctx)
	turn = f.settle(t, s, turn.ID)
	wantState(t, turn, chat.StateFailed)
	if !strings.Contains(turn.Error, "revoked") || len(turn.Calls) != 1 {
		t.Fatalf("turn = %+v", turn)
	}
}

func TestTurn_EndpointErrorsAreReadableAndNeverShowTheKey(t *testing.T) {
	t.Run("401 that echoes the key", func(t *testing.T) {
		f := newFixture(t, chattest.Response{Status: http.StatusUnauthorized, ErrorMessage: "Incorrect API key provided: " + apiKey})
		turn := f.start(t, f.instance(t), "Hello")
		wantState(t, turn, chat.StateFailed)
		if !strings.Contains(turn.Error, "401 Unauthorized") || strings.Contains(turn.Error, apiKey) || !strings.Contains(turn.Error, "[redacted]") {
			t.Fatalf("error = %q", turn.Error)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		hold := make(chan struct{})
		defer close(hold)
		f := newFixture(t, chattest.Response{Hold: hold})
		s := chat.NewService(chat.Config{BaseURL: f.model.URL, APIKey: apiKey, Model: "fake-model", RequestTimeout: 300 * time.Millisecond},
			f.pool, f.props, nil, slog.New(slog.DiscardHandler))
		t.Cleanup(s.Close)
		turn := f.start(t, s, "Hello")
		wantState(t, turn, chat.StateFailed)
		msgs := f.transcript(t)
		if last := msgs[len(msgs)-1]; last.Role != "notice" || !strings.Contains(last.Content, "did not finish answering") {
			t.Fatalf("last line = %+v", last)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		f := newFixture(t)
		s := chat.NewService(chat.Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: apiKey, Model: "fake-model"},
			f.pool, f.props, nil, slog.New(slog.DiscardHandler))
		t.Cleanup(s.Close)
		turn := f.start(t, s, "Hello")
		wantState(t, turn, chat.StateFailed)
		if !strings.Contains(turn.Error, "could not be reached") || strings.Contains(turn.Error, apiKey) {
			t.Fatalf("error = %q", turn.Error)
		}
	})
}
