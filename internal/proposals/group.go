package proposals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Group commit. PostgreSQL's cost of an automatic call is mostly per
// statement and per transaction (executor start-up, trigger queues, the
// commit's WAL flush), not per row. So automatic calls that arrive while
// others are being written share the next transaction: it reads what
// their decisions need, decides each, runs each tool in turn, and records
// every call in one set-based statement (RecordAutoCalls) sent with the
// COMMIT.
//
// Each call is decided, run and recorded exactly as it would be alone:
// the same rows, audit rows and receipt, its decision read and its effect
// in one transaction. What the group changes is only that the transaction
// is shared, so the rule is that no call can fail another:
//
//   - a call that would not simply run at once (refused, deferred to a
//     person, constrained, a short rationale) leaves the group before
//     anything is written, and goes through the path of a call alone;
//   - a tool that fails or panics, or a statement that fails, rolls the
//     whole group back, and every call in it runs again alone. Nothing
//     committed, so nothing runs twice; the failing call fails alone, as
//     it would have;
//   - a connection lost after the COMMIT was sent leaves the outcome
//     unknown: every call gets an OutcomeUnknownError naming its
//     proposal, as a call alone would, and none runs again.
//
// There is no timer: a call waits only while a group transaction is
// already writing (at most writers of them at once). One client alone
// never waits for anybody, and its call is the single path's.
type group struct {
	b batcher[*grouped]
}

// maxGroup bounds one transaction's calls: its locks are held until it
// commits, and a failure sends every call in it back alone.
const maxGroup = 32

// grouped is one call waiting in (or led by) the group.
type grouped struct {
	ctx   context.Context
	p     auth.Principal
	scope Scope
	c     checked
	in    Input

	out Proposal
	err error
	// alone sends the call to the path of a call alone (nothing was
	// written for it).
	alone bool
}

// SetGroupCommit sets how many group transactions may write at once
// (see group), and as many statements recording outside reads (see
// outsideRecord); 0 turns group commit off, and every call has a
// transaction, and every record a statement, of its own.
func (s *Service) SetGroupCommit(writers int) {
	if writers <= 0 {
		s.group, s.outside = nil, nil
		return
	}
	s.group = &group{b: batcher[*grouped]{writers: writers, max: maxGroup, write: s.commitGroup}}
	s.outside = &batcher[*outsideRecord]{writers: writers, max: maxGroup, write: s.writeOutsideRecords}
}

// groupable reports whether a call may join a group transaction: an
// in-database tool whose call could run at once, with nothing held or
// counted for it in the database beside its decision (no idempotency key,
// no confirm, no limit but one per agent counted in memory).
func groupable(c checked, in Input) bool {
	rl := c.tool.Contract.RateLimits
	return in.Idem == nil && in.IdempotencyKey == "" && !in.Confirm && !c.short &&
		!c.tool.Outside() && !c.tool.Caller && c.tool.Effect != policy.EffectDestructive && !c.tool.Contract.Gating.Required &&
		(rl.PerAgentPerMinute <= 0 || sharedLimit(c.tool.Contract.Authority)) && rl.PerWorkspacePerHour <= 0 && rl.PerWorkspacePerDay <= 0
}

// propose queues the call and waits for its outcome, leading a group
// transaction when its turn comes. done is false when the call is to run
// alone; c then says whether its limit per agent was counted already.
func (gr *group) propose(ctx context.Context, p auth.Principal, scope Scope, c *checked, in Input) (out Proposal, err error, done bool) {
	g := &grouped{ctx: ctx, p: p, scope: scope, c: *c, in: in}
	gr.b.do(g)
	c.counted = g.c.counted
	return g.out, g.err, !g.alone
}

// member is a call in a group transaction, once decided.
type member struct {
	g       *grouped
	d       decision
	warning string
	params  db.InsertProposalParams
	created map[string]any
	rec     db.RecordAutoCallParams
	row     db.Proposal
}

// commitGroup decides, runs and records calls in one transaction, or
// sends them back alone (see group). It sets each call's outcome, and
// calls sent (if at all) once the transaction's COMMIT is sent.
func (s *Service) commitGroup(calls []*grouped, sent func()) {
	// rerun says whether the calls may run again alone: not once their
	// transaction may have committed.
	rerun := true
	defer func() {
		// A tool that panics takes only its own call down, as it would
		// alone: before the commit, every call runs again alone (the
		// panicking one in its own request).
		if r := recover(); r != nil {
			s.log.Error("group commit: panic", "panic", r, "rerun", rerun, "stack", string(debug.Stack()))
			for _, g := range calls {
				switch {
				case rerun && g.err == nil:
					g.alone, g.out = true, Proposal{}
				case !rerun && g.out.ID == uuid.Nil && g.err == nil:
					g.err = fmt.Errorf("proposals: group: %v", r)
				}
			}
		}
	}()
	live := calls[:0:0]
	for _, g := range calls {
		if err := g.ctx.Err(); err != nil {
			g.err = err // its caller has gone: nothing is done for it
			continue
		}
		live = append(live, g)
	}
	if len(live) == 1 {
		// Nobody to share with: the call's own transaction, run in the
		// leader's turn so that the writers bound holds.
		g := live[0]
		rerun = false // its own path may have committed
		g.out, g.err = s.proposeAlone(g.ctx, g.p, g.scope, g.c, g.in)
		return
	}
	if len(live) == 0 {
		return
	}
	// The transaction is every member's: one caller going away must not
	// cancel it for the others (it takes only its own answer with it).
	ctx := context.WithoutCancel(live[0].ctx)
	members, tx, err := s.groupRun(ctx, live)
	if tx != nil {
		defer tx.Rollback(ctx)
	}
	if err != nil {
		s.log.Debug("group commit: calls run alone", "calls", len(live), "err", err)
		for _, g := range live {
			g.alone = true
		}
		return
	}
	if len(members) < 2 {
		// Too few left to share: the transaction is dropped (it wrote
		// nothing) and they run alone.
		for _, m := range members {
			m.g.alone = true
		}
		return
	}
	rerun = false
	createdAt, err := s.groupRecord(ctx, tx, members, sent)
	rerun = err != nil && !errors.Is(err, ErrOutcomeUnknown)
	if errors.Is(err, ErrOutcomeUnknown) {
		// Each caller is told which proposal may have been recorded.
		for _, m := range members {
			m.g.err = unknownOutcome(m.rec.ID, err)
		}
		return
	}
	if err != nil {
		s.log.Debug("group commit: calls run alone", "calls", len(members), "err", err)
		for _, m := range members {
			m.g.alone = true
		}
		return
	}
	for _, m := range members {
		if m.warning != "" {
			s.warnRationale(m.g.p, m.g.c, m.d)
		}
		out := recordedAt(m.row, createdAt)
		out.Decision, out.EffectDecision = &m.d.Decision, &m.d.Decision
		out.RationaleWarning = m.warning
		m.g.out = out
		s.announce(announced(m.params), false)
	}
}

// groupRun begins the transaction, decides every call on the rows as they
// are now, and runs the tools of those that run at once; the others are
// marked alone. Any error means that every call runs alone.
func (s *Service) groupRun(ctx context.Context, calls []*grouped) ([]*member, *callTx, error) {
	type readKey struct {
		kind   ScopeKind
		id, ws uuid.UUID
		user   uuid.UUID
		effect policy.Effect
	}
	var (
		tx    *callTx
		q     *db.Queries
		read  = map[readKey]decisionRows{}
		ready []*member
	)
	defer func() {
		if r := recover(); r != nil {
			// The caller never got the transaction to roll back.
			if tx != nil {
				tx.Rollback(ctx)
			}
			panic(r)
		}
	}()
	for _, g := range calls {
		tool := g.c.tool
		key := readKey{kind: g.scope.Kind, id: g.scope.ID, ws: g.p.WorkspaceID, user: g.p.UserID, effect: tool.Effect}
		rows, ok := read[key]
		if !ok {
			var err error
			if tx == nil {
				// The transaction begins in the round trip of its first read.
				tx, rows, err = s.beginDeciding(ctx, g.p, g.scope, tool)
				if tx != nil {
					q = s.q.WithTx(tx)
				}
			} else {
				rows, err = s.readForDecision(ctx, q, g.p, g.scope, tool)
			}
			if errors.Is(err, conversations.ErrNotFound) || errors.Is(err, notebooks.ErrNotFound) {
				// Its own path says so; the transaction is unharmed.
				g.alone = true
				continue
			}
			if err != nil {
				return nil, tx, err
			}
			read[key] = rows
		}
		m, ok := s.groupMember(g, rows)
		if !ok {
			g.alone = true
			continue
		}
		ready = append(ready, m)
	}
	if len(ready) < 2 {
		return ready, tx, nil
	}
	for _, m := range ready {
		if err := s.groupExecute(ctx, q, m); err != nil {
			return nil, tx, err
		}
	}
	return ready, tx, nil
}

// groupMember decides a call on rows read in the group's transaction. It
// says false for a call that would not simply run at once: that one is
// the single path's.
func (s *Service) groupMember(g *grouped, rows decisionRows) (*member, bool) {
	d, err := s.decideOn(rows, g.p, g.scope, g.c.tool, g.c.args)
	if err != nil || d.State != policy.StateAllowed || len(d.constraints) > 0 || d.Grant != nil ||
		policy.AtEffect(policy.PathAuto, d.State, d.State) != policy.OutcomeRun {
		return nil, false
	}
	warning, err := rationaleVerdict(g.c, d, time.Now())
	if err != nil {
		return nil, false
	}
	params, err := proposalParams(g.p, g.scope, g.c, d, StatusApplying, false)
	if err != nil {
		return nil, false
	}
	// Last, since it counts: the limit per agent, in memory. A call over
	// it is the single path's to refuse.
	if limit := g.c.tool.Contract.RateLimits.PerAgentPerMinute; limit > 0 {
		if ok, _ := s.limiter.Take(agentBucket(g.p, g.c.tool), limit, time.Minute, time.Now()); !ok {
			return nil, false
		}
		g.c.counted = true
	}
	return &member{g: g, d: d, warning: warning, params: params, created: createdData(g.c, d, g.scope, warning)}, true
}

// groupExecute runs a member's tool in the group's transaction and
// prepares its record. A tool's failure is returned, not recorded: the
// group rolls back and the call fails alone, as it would have.
func (s *Service) groupExecute(ctx context.Context, q *db.Queries, m *member) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("proposals: id: %w", err)
	}
	g := m.g
	out, err := g.c.tool.Execute(ctx, q, g.p.WorkspaceID, g.c.args)
	if err != nil {
		return fmt.Errorf("proposals: %s in a group: %w", g.c.tool.Name, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("proposals: encode result: %w", err)
	}
	m.rec, m.row, err = s.autoRecord(g.p, id, m.params, g.c.tool, redact(b, m.params.Constraints), "", false, m.created)
	return err
}

// groupRecord writes every member's record in one statement, sent with
// the COMMIT, and returns the transaction's time. An error that is
// ErrOutcomeUnknown (the connection failed after the COMMIT was sent)
// means the calls may have been recorded, so none may run again.
func (s *Service) groupRecord(ctx context.Context, tx *callTx, members []*member, sent func()) (time.Time, error) {
	rows := make([]autoRow, len(members))
	for i, m := range members {
		rows[i] = autoRowOf(i, m.rec)
	}
	calls, err := json.Marshal(rows)
	if err != nil {
		return time.Time{}, fmt.Errorf("proposals: encode calls: %w", err)
	}
	r, err := db.New(tx.committingThen(sent)).RecordAutoCalls(ctx, calls)
	switch {
	case err == nil && int(r.Recorded) != len(members):
		// Cannot happen with the statement as written; if it did, the
		// transaction has committed rows that do not match the calls.
		return time.Time{}, fmt.Errorf("%w: %d recorded of %d", ErrOutcomeUnknown, r.Recorded, len(members))
	case err == nil:
		return r.CreatedAt, nil
	case errors.Is(err, ErrOutcomeUnknown):
		return time.Time{}, err // the COMMIT's answer was lost
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return time.Time{}, err // rolled back: nothing recorded
	}
	// The server refused the statement and skipped the COMMIT, or nothing
	// was sent: the transaction is still open. One that cannot be rolled
	// back may yet have committed, unless nothing of it was sent.
	if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) && !sentNothing(err) {
		return time.Time{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return time.Time{}, err
}

// autoRow is one call in RecordAutoCalls' JSON array: RecordAutoCall's
// parameters, named like the statement's columns.
type autoRow struct {
	Ord               int             `json:"ord"`
	ID                uuid.UUID       `json:"id"`
	WorkspaceID       uuid.UUID       `json:"workspace_id"`
	OwnerID           uuid.UUID       `json:"owner_id"`
	ConversationID    uuid.NullUUID   `json:"conversation_id"`
	NotebookID        uuid.NullUUID   `json:"notebook_id"`
	ProposedByTokenID uuid.NullUUID   `json:"proposed_by_token_id"`
	ProposedByKind    string          `json:"proposed_by_kind"`
	Tool              string          `json:"tool"`
	Effect            string          `json:"effect"`
	Arguments         json.RawMessage `json:"arguments"`
	Rationale         string          `json:"rationale"`
	PermissionMode    *string         `json:"permission_mode"`
	TrustLevel        *string         `json:"trust_level"`
	Disposition       string          `json:"disposition"`
	Authority         *string         `json:"authority"`
	Risk              *string         `json:"risk"`
	ActionClass       *string         `json:"action_class"`
	State             *string         `json:"state"`
	Decision          json.RawMessage `json:"decision"`
	Constraints       json.RawMessage `json:"constraints"`
	Status            string          `json:"status"`
	Result            json.RawMessage `json:"result"`
	Error             *string         `json:"error"`
	DryRun            bool            `json:"dry_run"`
	DecisionInput     json.RawMessage `json:"decision_input"`
	ActorKind         string          `json:"actor_kind"`
	RetentionUntil    time.Time       `json:"retention_until"`
	CreatedData       json.RawMessage `json:"created_data"`
	FinishedAction    string          `json:"finished_action"`
	FinishedData      json.RawMessage `json:"finished_data"`
	ReceiptID         uuid.UUID       `json:"receipt_id"`
	ReceiptContent    json.RawMessage `json:"receipt_content"`
	ReceiptHash       []byte          `json:"receipt_hash"` // base64, as the statement decodes it
	ReceiptMetadata   json.RawMessage `json:"receipt_metadata"`
}

func autoRowOf(ord int, r db.RecordAutoCallParams) autoRow {
	return autoRow{Ord: ord, ID: r.ID, WorkspaceID: r.WorkspaceID, OwnerID: r.OwnerID, ConversationID: r.ConversationID,
		NotebookID: r.NotebookID, ProposedByTokenID: r.ProposedByTokenID, ProposedByKind: r.ProposedByKind, Tool: r.Tool,
		Effect: r.Effect, Arguments: r.Arguments, Rationale: r.Rationale, PermissionMode: textPtr(r.PermissionMode.String, r.PermissionMode.Valid),
		TrustLevel: textPtr(r.TrustLevel.String, r.TrustLevel.Valid), Disposition: r.Disposition,
		Authority: textPtr(r.Authority.String, r.Authority.Valid), Risk: textPtr(r.Risk.String, r.Risk.Valid),
		ActionClass: textPtr(r.ActionClass.String, r.ActionClass.Valid), State: textPtr(r.State.String, r.State.Valid),
		Decision: nullJSON(r.Decision), Constraints: nullJSON(r.Constraints), Status: r.Status, Result: nullJSON(r.Result),
		Error: textPtr(r.Error.String, r.Error.Valid), DryRun: r.DryRun, DecisionInput: nullJSON(r.DecisionInput),
		ActorKind: r.ActorKind, RetentionUntil: r.RetentionUntil, CreatedData: nullJSON(r.CreatedData),
		FinishedAction: r.FinishedAction, FinishedData: nullJSON(r.FinishedData), ReceiptID: r.ReceiptID,
		ReceiptContent: nullJSON(r.ReceiptContent), ReceiptHash: r.ReceiptHash, ReceiptMetadata: nullJSON(r.ReceiptMetadata)}
}

func textPtr(s string, valid bool) *string {
	if !valid {
		return nil
	}
	return &s
}

// nullJSON is a JSON value as a parameter is one: none is SQL NULL.
func nullJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// DefaultGroupWriters is how many group transactions write at once by
// default for a pool of poolConns connections: three in four of them.
// Until that many automatic calls are in flight, none waits and each has
// its transaction alone; beyond it, calls share transactions instead of
// queueing for connections. (Measured on 2 cores with 8 connections: at 8
// clients no change; at 32 clients 1.45× the calls per second, with about
// a third less database CPU per call. Fewer writers group more at 8
// clients but leave the cores idle while a group's tools run one after
// another.)
func DefaultGroupWriters(poolConns int32) int { return max(1, int(poolConns)*3/4) }
