package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// Run resumes turns until ctx ends: at once, whenever Wake is called (the
// server calls it on each conversation event from any instance: a call
// resolved), and every SweepEvery. Every instance runs it; the lease lets
// exactly one resume a turn.
func (s *Service) Run(ctx context.Context) {
	if !s.cfg.Enabled() {
		return
	}
	tick := time.NewTicker(s.cfg.SweepEvery)
	defer tick.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// Wake makes Run look for turns to resume now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Sweep claims and runs every turn that needs it now: a waiting turn
// whose calls are all resolved, a running turn whose instance stopped.
// It returns how many it claimed.
func (s *Service) Sweep(ctx context.Context) int {
	n := 0
	for ctx.Err() == nil && s.ctx.Err() == nil {
		row, err := s.q.ClaimTurn(ctx, db.ClaimTurnParams{Owner: text(s.instance), Lease: interval(s.cfg.Lease)})
		if errors.Is(err, pgx.ErrNoRows) {
			return n
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("chat: claiming turns", "err", err)
			}
			return n
		}
		n++
		s.log.Info("chat: resuming turn", "turn", row.ID, "conversation", row.ConversationID)
		s.launch(row.WorkspaceID, row.ID)
	}
	return n
}

// Close stops this instance's turns where they are and hands them over:
// their leases end now, so another instance (or this one, restarted)
// resumes them.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.q.ReleaseLeases(ctx, text(s.instance)); err != nil {
		s.log.Warn("chat: releasing leases", "err", err)
	}
}

// launch runs a turn this instance holds the lease of (ws is its workspace).
func (s *Service) launch(ws, id uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	if _, ok := s.running[id]; ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.running[id] = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.running, id)
			s.mu.Unlock()
			cancel()
		}()
		s.drive(ctx, cancel, ws, id)
	}()
}

// errLost: the turn is no longer this instance's to write (stopped, or
// its lease taken over).
var errLost = errors.New("chat: turn no longer ours")

// errRetryLater: the turn cannot go on now; it is resumed after retryLater.
var errRetryLater = errors.New("chat: retry the turn later")

const retryLater = 5 * time.Second

// run is one turn being driven by this instance.
type run struct {
	s      *Service
	row    db.ChatTurn
	msgs   []Message
	agent  auth.Principal
	prompt int64
	compl  int64
	reqs   int32
}

func (s *Service) drive(ctx context.Context, cancel context.CancelFunc, ws, id uuid.UUID) {
	beat := make(chan struct{})
	go func() { defer close(beat); s.heartbeat(ctx, cancel, ws, id) }()
	defer func() { cancel(); <-beat }() // no renewal outlives the run
	err := s.step(ctx, ws, id)
	switch {
	case err == nil, errors.Is(err, errLost):
	case errors.Is(err, errRetryLater):
		if perr := s.q.PostponeTurn(context.WithoutCancel(ctx), db.PostponeTurnParams{ID: id, WorkspaceID: ws, Owner: text(s.instance), Lease: interval(retryLater)}); perr != nil {
			s.log.Warn("chat: postponing a turn", "turn", id, "err", perr)
		}
	case ctx.Err() != nil:
		// Stopped by the owner, or this instance is stopping: the turn's
		// state is as last recorded, and another instance resumes it.
	default:
		s.log.Error("chat: turn failed", "turn", id, "err", err)
		msg := "The turn failed: internal error (see the server log)."
		var me *modelErr
		switch {
		case errors.As(err, &me):
			msg = me.msg
		case apperr.Code(err) != apperr.EINTERNAL:
			msg = apperr.Message(err)
		}
		if ferr := s.finish(context.WithoutCancel(ctx), ws, id, StateFailed, msg); ferr != nil && !errors.Is(ferr, errLost) {
			s.log.Error("chat: recording a failed turn", "turn", id, "err", ferr)
		}
	}
}

// heartbeat renews the lease while the turn runs; a turn stopped (or taken
// over) ends its run.
func (s *Service) heartbeat(ctx context.Context, cancel context.CancelFunc, ws, id uuid.UUID) {
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Not cancelled half-way: a renewal that committed after the
			// run ended would keep the turn from the instance taking over.
			n, err := s.q.RenewLease(context.WithoutCancel(ctx), db.RenewLeaseParams{ID: id, WorkspaceID: ws, Owner: text(s.instance), Lease: interval(s.cfg.Lease)})
			if err == nil && n == 0 {
				cancel()
				return
			}
		}
	}
}

// finish ends a turn with a notice in the transcript.
func (s *Service) finish(ctx context.Context, ws, id uuid.UUID, state State, msg string) error {
	row, err := s.q.GetTurn(ctx, db.GetTurnParams{ID: id, WorkspaceID: ws})
	if err != nil {
		return fmt.Errorf("chat: turn: %w", err)
	}
	r := &run{s: s, row: row, prompt: row.PromptTokens, compl: row.CompletionTokens, reqs: row.ModelRequests}
	if err := json.Unmarshal(row.Messages, &r.msgs); err != nil {
		return fmt.Errorf("chat: decode messages: %w", err)
	}
	return r.save(ctx, state, msg, "", msg)
}

// save records the turn's step in one transaction: its messages, tokens
// and state, and lines for the transcript (the assistant's words, a
// notice). errLost if the turn is no longer this instance's.
func (r *run) save(ctx context.Context, state State, errMsg, said, noticeMsg string) error {
	s := r.s
	raw, err := json.Marshal(r.msgs)
	if err != nil {
		return fmt.Errorf("chat: encode messages: %w", err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("chat: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	n, err := q.SaveTurn(ctx, db.SaveTurnParams{ID: r.row.ID, WorkspaceID: r.row.WorkspaceID, Messages: raw, PromptTokens: r.prompt, CompletionTokens: r.compl, ModelRequests: r.reqs,
		State: string(state), Error: text(errMsg), Owner: text(s.instance)})
	if err != nil {
		return fmt.Errorf("chat: save turn: %w", err)
	}
	if n == 0 {
		return errLost
	}
	if said = strings.TrimSpace(said); said != "" {
		if _, err := q.InsertChatMessage(ctx, db.InsertChatMessageParams{WorkspaceID: r.row.WorkspaceID, ConversationID: r.row.ConversationID, Role: "assistant", Content: clip.Ellipsis(said, 20000),
			AuthorUserID: uuid.NullUUID{UUID: r.row.OwnerID, Valid: true}}); err != nil {
			return fmt.Errorf("chat: message: %w", err)
		}
	}
	if noticeMsg != "" {
		if err := notice(ctx, q, r.row.WorkspaceID, r.row.ConversationID, noticeMsg); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("chat: commit: %w", err)
	}
	s.notify(r.row.WorkspaceID, r.row.ConversationID)
	return nil
}

// step drives the turn from its last durable state until it is done,
// waits for a person, or fails.
func (s *Service) step(ctx context.Context, ws, id uuid.UUID) error {
	row, err := s.q.GetTurn(ctx, db.GetTurnParams{ID: id, WorkspaceID: ws})
	if err != nil {
		return fmt.Errorf("chat: turn: %w", err)
	}
	if row.State != string(StateRunning) || row.LeaseOwner.String != s.instance {
		return errLost
	}
	r := &run{s: s, row: row, prompt: row.PromptTokens, compl: row.CompletionTokens, reqs: row.ModelRequests}
	if err := json.Unmarshal(row.Messages, &r.msgs); err != nil {
		return fmt.Errorf("chat: decode messages: %w", err)
	}
	if r.agent, err = s.agentPrincipal(ctx, row.AgentTokenID); err != nil {
		return err
	}
	for {
		last := r.msgs[len(r.msgs)-1]
		if last.Role == "assistant" && len(last.ToolCalls) > 0 {
			waiting, err := r.settleCalls(ctx, last.ToolCalls)
			if err != nil || waiting {
				return err
			}
			continue
		}
		if last.Role == "assistant" {
			return r.save(ctx, StateDone, "", "", "")
		}
		if done, err := r.overBudget(ctx); done || err != nil {
			return err
		}
		if r.reqs >= int32(s.cfg.MaxToolCalls+5) {
			return r.save(ctx, StateStopped, "too many model requests", "", fmt.Sprintf("The model was asked %d times in this turn; the turn stopped.", r.reqs))
		}
		ans, err := r.ask(ctx)
		if err != nil {
			return err
		}
		r.msgs = append(r.msgs, Message{Role: "assistant", Content: ans.Content, ToolCalls: ans.ToolCalls})
		if done, err := r.overBudget(ctx); done || err != nil {
			// What the model said is kept; its calls are not proposed.
			return err
		}
		if len(ans.ToolCalls) == 0 {
			return r.save(ctx, StateDone, "", ans.Content, "")
		}
		made, err := s.q.CountToolCalls(ctx, db.CountToolCallsParams{WorkspaceID: ws, TurnID: id})
		if err != nil {
			return fmt.Errorf("chat: calls: %w", err)
		}
		if int(made)+len(ans.ToolCalls) > s.cfg.MaxToolCalls {
			msg := fmt.Sprintf("The model asked for more than %d tool calls in one turn; its last %d calls were not proposed and the turn stopped.", s.cfg.MaxToolCalls, len(ans.ToolCalls))
			return r.save(ctx, StateStopped, msg, ans.Content, msg)
		}
		// The calls are durable before any is proposed: a resumed turn
		// proposes those that were not (their idempotency keys make a call
		// proposed just before a crash the same proposal).
		if err := r.save(ctx, StateRunning, "", ans.Content, ""); err != nil {
			return err
		}
	}
}

// overBudget stops the turn when the conversation's tokens reached its
// budget.
func (r *run) overBudget(ctx context.Context) (bool, error) {
	s := r.s
	set, err := s.settings(ctx, s.q, r.row.ConversationID)
	if err != nil || set.Budget == 0 {
		return false, err
	}
	used, err := s.q.ConversationTokens(ctx, db.ConversationTokensParams{WorkspaceID: r.row.WorkspaceID, ConversationID: r.row.ConversationID})
	if err != nil {
		return false, fmt.Errorf("chat: tokens: %w", err)
	}
	// This turn's tokens as counted now (the row may be behind).
	total := used.PromptTokens + used.CompletionTokens - (r.row.PromptTokens + r.row.CompletionTokens) + r.prompt + r.compl
	if total < set.Budget {
		return false, nil
	}
	last := r.msgs[len(r.msgs)-1]
	said := ""
	if last.Role == "assistant" {
		said = last.Content
	}
	msg := fmt.Sprintf("This conversation's token budget (%d tokens) is used up: %d tokens so far. The turn stopped; raise the budget to continue.", set.Budget, total)
	return true, r.save(ctx, StateStopped, msg, said, msg)
}

// ask streams the model's answer, writing the text so far on the turn's
// row every FlushEvery for the pages of every instance.
func (r *run) ask(ctx context.Context) (reply, error) {
	s := r.s
	ts := offerTools(s.props.Tools())
	var last time.Time
	lost := false
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	flush := func(t string) {
		// Not cancelled half-way (see heartbeat).
		n, err := s.q.SetStreaming(context.WithoutCancel(ctx), db.SetStreamingParams{ID: r.row.ID, WorkspaceID: r.row.WorkspaceID, Streaming: t, Owner: text(s.instance), Lease: interval(s.cfg.Lease)})
		if err == nil && n == 0 {
			lost = true
			cancel()
			return
		}
		s.notify(r.row.WorkspaceID, r.row.ConversationID)
	}
	ans, err := s.complete(ctx, r.row.Model, r.msgs, ts, func(t string) {
		if time.Since(last) >= s.cfg.FlushEvery {
			last = time.Now()
			flush(t)
		}
	})
	r.reqs++
	r.prompt += ans.PromptTokens
	r.compl += ans.CompletionTokens
	if lost {
		return ans, errLost
	}
	return ans, err
}

// settleCalls proposes the calls of the last step that have no answer
// yet, then either waits (a call waits for a person) or appends every
// call's result and goes on.
func (r *run) settleCalls(ctx context.Context, calls []ToolCall) (waiting bool, err error) {
	s := r.s
	rows, err := s.q.ListToolCalls(ctx, db.ListToolCallsParams{WorkspaceID: r.row.WorkspaceID, TurnID: r.row.ID})
	if err != nil {
		return false, fmt.Errorf("chat: calls: %w", err)
	}
	have := map[string]bool{}
	for _, c := range rows {
		have[c.ToolCallID] = true
	}
	ts := offerTools(s.props.Tools())
	seq := len(rows)
	if len(rows) < len(calls) {
		// A model agent revoked meanwhile proposes nothing more.
		if r.agent, err = s.agentPrincipal(ctx, r.row.AgentTokenID); err != nil {
			return false, err
		}
	}
	for _, c := range calls {
		if have[c.ID] {
			continue
		}
		if err := r.propose(ctx, ts, c, seq); err != nil {
			return false, err
		}
		seq++
	}
	if rows, err = s.q.ListToolCalls(ctx, db.ListToolCallsParams{WorkspaceID: r.row.WorkspaceID, TurnID: r.row.ID}); err != nil {
		return false, fmt.Errorf("chat: calls: %w", err)
	}
	byID := map[string]db.ListToolCallsRow{}
	for _, c := range rows {
		byID[c.ToolCallID] = c
	}
	results := make([]Message, 0, len(calls))
	for _, c := range calls {
		content, pending := resultOf(byID[c.ID])
		if pending {
			// The turn waits; any instance resumes it when every call of
			// the step is resolved.
			return true, r.save(ctx, StateWaiting, "", "", "")
		}
		results = append(results, Message{Role: "tool", ToolCallID: c.ID, Content: content})
	}
	r.msgs = append(r.msgs, results...)
	return false, r.save(ctx, StateRunning, "", "", "")
}

// propose puts one model call through the gate, exactly like an agent's:
// Propose with the conversation as scope, as the owner's model agent. What
// cannot be proposed (an unknown tool, arguments that are not JSON, a
// refusal) is answered at once, for the model to correct.
func (r *run) propose(ctx context.Context, ts toolset, c ToolCall, seq int) error {
	s := r.s
	record := func(proposal uuid.UUID, outcome *toolResult) error {
		var raw []byte
		tool := c.Name
		if outcome != nil {
			raw = outcome.json()
		}
		if t, ok := ts.byFunction[c.Name]; ok {
			tool = t.Name
		}
		if err := s.q.InsertToolCall(ctx, db.InsertToolCallParams{WorkspaceID: r.row.WorkspaceID, TurnID: r.row.ID, ToolCallID: c.ID, Seq: int32(seq), Tool: clip.Ellipsis(tool, 200),
			ProposalID: uuid.NullUUID{UUID: proposal, Valid: proposal != uuid.Nil}, Outcome: raw}); err != nil {
			return fmt.Errorf("chat: record call: %w", err)
		}
		return nil
	}
	tool, ok := ts.byFunction[c.Name]
	if !ok {
		names := make([]string, 0, len(ts.byFunction))
		for n := range ts.byFunction {
			names = append(names, n)
		}
		return record(uuid.Nil, &toolResult{Status: "invalid", Error: fmt.Sprintf("No tool is named %q. The tools are: %s.", c.Name, strings.Join(sortStrings(names), ", "))})
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || args == nil {
		return record(uuid.Nil, &toolResult{Status: "invalid", Error: "The arguments are not a JSON object; send the arguments as one JSON object."})
	}
	var rationale string
	if raw, ok := args["rationale"]; ok {
		_ = json.Unmarshal(raw, &rationale)
		delete(args, "rationale")
	}
	arguments, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("chat: encode arguments: %w", err)
	}
	scope := proposals.InConversation(r.row.ConversationID)
	key := idempotencyKey(r.row.ID, c.ID)
	hash, err := proposals.RequestHash(map[string]any{"scope": scope.Kind, "scope_id": scope.ID, "tool": tool.Name, "arguments": json.RawMessage(arguments), "rationale": rationale})
	if err != nil {
		return err
	}
	begun, err := s.props.BeginIdempotent(ctx, r.agent, scope, tool.Name, key, hash)
	if apperr.Code(err) == apperr.ECONFLICT {
		// The instance that ran this turn before proposed this call and
		// stopped before it finished: its key answers once its lease ends.
		return errRetryLater
	}
	if err != nil {
		return r.refused(err, record)
	}
	switch {
	case begun.Replay != nil:
		var stored struct {
			ProposalID uuid.UUID `json:"proposal_id"`
		}
		_ = json.Unmarshal(begun.Replay.Body, &stored)
		return record(stored.ProposalID, nil)
	case begun.Recorded != nil:
		return record(begun.Recorded.ID, nil)
	}
	held := begun.Held
	defer held.Release(ctx)
	p, err := s.props.Propose(ctx, r.agent, scope, proposals.Input{Tool: tool.Name, Arguments: arguments, Rationale: rationale, IdempotencyKey: key, Idem: held})
	if err != nil {
		if p.ID != uuid.Nil {
			// Recorded, then refused to the agent (a human-only action
			// prepared for the owner): answered now.
			if serr := held.Store(ctx, stored(p.ID)); serr != nil {
				return serr
			}
			out := &toolResult{Status: "refused", Reason: apperr.Message(err)}
			return record(p.ID, out)
		}
		return r.refused(err, record)
	}
	if err := held.Store(ctx, stored(p.ID)); err != nil {
		return err
	}
	return record(p.ID, nil)
}

// refused answers a call the gate refused before recording it (invalid
// arguments, a blocked call, a broken constraint, a rate limit); an
// internal error fails the turn.
func (r *run) refused(err error, record func(uuid.UUID, *toolResult) error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Code == apperr.EINTERNAL {
		return err
	}
	status := "refused"
	if ae.Code == apperr.EINVALID || ae.Code == apperr.EBADREQ {
		status = "invalid"
	}
	return record(uuid.Nil, &toolResult{Status: status, Error: ae.Message, Fields: ae.Fields})
}

func stored(id uuid.UUID) proposals.StoredResponse {
	b, _ := json.Marshal(map[string]string{"proposal_id": id.String()})
	return proposals.StoredResponse{Status: 200, ContentType: "application/json", Body: b}
}

func sortStrings(list []string) []string {
	for i := 1; i < len(list); i++ {
		for j := i; j > 0 && list[j] < list[j-1]; j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
	return list
}
