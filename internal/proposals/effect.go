package proposals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The moment of effect. Every path (auto, the owner's confirm, an
// approval, the principal's own performance) takes the layered decision
// again inside the transaction that claims the call, on the arguments that
// will actually run and the rows as they are now, and runs the call only
// within the path's ceiling (policy.AtEffect). Tools whose effect lives in
// Gatehouse's database run in that same transaction, so a crash leaves
// them done or not started; tools with an outside effect are claimed and
// committed first, delivered with no transaction open, then recorded.

// effectCall is a call at the moment of effect.
type effectCall struct {
	cur  db.Proposal
	tool *tools.Tool
	// args will run; edited when they differ from what was proposed.
	args   json.RawMessage
	edited bool
	// d is the decision taken now; outcome what the path may do with it.
	d       decision
	outcome policy.Outcome
	// stored are the constraints kept on the proposal (an approver's).
	stored []policy.Constraint
}

// decisionJSON is the effect-time decision as stored on the proposal.
func (ec effectCall) decisionJSON() ([]byte, error) {
	b, err := json.Marshal(ec.d.Decision)
	if err != nil {
		return nil, fmt.Errorf("proposals: encode effect decision: %w", err)
	}
	return b, nil
}

// atEffect decides cur again for path, on edited (re-validated and
// re-classified) or on the arguments the proposal will run. The scope's
// row is read as its owner's: on the approval path the actor is not the
// owner.
func (s *Service) atEffect(ctx context.Context, q *db.Queries, p auth.Principal, cur db.Proposal, edited json.RawMessage, path policy.Path) (effectCall, error) {
	tool, ok := s.toolOf(cur.Tool, cur.CallerDeclaration)
	if !ok {
		return effectCall{}, apperr.Errorf(apperr.ECONFLICT, "The tool %q is no longer declared.", cur.Tool)
	}
	proposed := cur.Arguments
	if len(cur.AppliedArguments) > 0 {
		proposed = cur.AppliedArguments // an owner's edit that an approver now judges
	}
	args := proposed
	if len(edited) > 0 {
		var err error
		if args, err = compact(edited); err != nil {
			return effectCall{}, err
		}
		if err := tool.ValidateArguments(args); err != nil {
			return effectCall{}, err
		}
	}
	owner := p
	owner.UserID = cur.OwnerID
	d, err := s.decideForPerson(ctx, q, owner, scopeOf(cur), tool, args)
	if err != nil {
		return effectCall{}, err
	}
	var stored []policy.Constraint
	if err := json.Unmarshal(cur.Constraints, &stored); err != nil {
		return effectCall{}, fmt.Errorf("proposals: decode constraints: %w", err)
	}
	var proposedState policy.State
	if pd := decodeDecision(cur.Decision); pd != nil {
		proposedState = pd.State
	}
	return effectCall{cur: cur, tool: tool, args: args, edited: !sameJSON(args, cur.Arguments), d: d,
		outcome: policy.AtEffect(path, proposedState, d.State), stored: stored}, nil
}

// refuseAtEffect records that a call was refused at the moment of effect
// (its effect-time decision and an audit row with every layer's reason),
// commits, and returns why. Nothing runs; the proposal keeps its status.
func (s *Service) refuseAtEffect(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, ec effectCall, path policy.Path, why error) (Proposal, error) {
	dj, err := ec.decisionJSON()
	if err != nil {
		return Proposal{}, err
	}
	if err := q.RecordEffectDecision(ctx, db.RecordEffectDecisionParams{ID: ec.cur.ID, WorkspaceID: ec.cur.WorkspaceID, EffectDecision: dj}); err != nil {
		return Proposal{}, fmt.Errorf("proposals: record effect decision: %w", err)
	}
	data := map[string]any{"path": path, "tool": ec.tool.Name, "state": ec.d.State, "action_class": ec.d.class,
		"layers": ec.d.Layers, "reason": apperr.Message(why)}
	if ec.edited {
		data["arguments"] = json.RawMessage(ec.args)
	}
	if err := s.audit(ctx, q, p, ec.tool, "proposal.refused_at_effect", "proposal", ec.cur.ID.String(), data); err != nil {
		return Proposal{}, err
	}
	row := ec.cur
	row.EffectDecision = dj
	if ec.edited {
		row.AppliedArguments = ec.args
	}
	outcome := refusalOutcome(ec.d.State)
	if ae, ok := why.(*apperr.Error); ok && ae.Extra["constraint"] != nil {
		outcome = outcomeConstraint
	}
	if _, err := s.record(ctx, q, p, receipts.KindRefusal, outcome, row, apperr.Message(why)); err != nil {
		return Proposal{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit refusal: %w", err)
	}
	s.announce(row, path == policy.PathApproval)
	return Proposal{}, why
}

// aboveCeiling is the refusal of a call whose effect-time decision is
// above what path may run.
func aboveCeiling(ec effectCall, path policy.Path) error {
	if ec.d.State == policy.StateBlocked || ec.d.State == policy.StateHumanOnly {
		e := refusal(ec.d, ec.cur.ID).(*apperr.Error)
		if path != policy.PathPerformed {
			e.Message = "Refused at the moment of effect: " + e.Message
		}
		return e
	}
	ceiling, _ := path.Ceiling()
	return &apperr.Error{Code: apperr.EFORBIDDEN,
		Message: fmt.Sprintf("Refused at the moment of effect: the call is now %s, above what %s may run (%s).", ec.d.State, path, ceiling),
		Extra:   map[string]any{"decision": ec.d.Decision, "proposal_id": ec.cur.ID.String()}}
}

// escalate turns the owner's confirm of a call that now needs an approver
// into an approval packet for the call as it will run (the edited
// arguments); nothing runs. The owner sees the packet; the agent reads
// pending_approval.
func (s *Service) escalate(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, ec effectCall) (Proposal, error) {
	dj, err := ec.decisionJSON()
	if err != nil {
		return Proposal{}, err
	}
	var applied []byte
	if ec.edited {
		applied = ec.args
	}
	row, err := q.EscalateProposal(ctx, db.EscalateProposalParams{ID: ec.cur.ID, WorkspaceID: ec.cur.WorkspaceID, AppliedArguments: applied, EffectDecision: dj})
	if errors.Is(err, pgx.ErrNoRows) {
		tx.Rollback(ctx)
		return Proposal{}, s.notPending(ctx, p, ec.cur.ID)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: escalate: %w", err)
	}
	if ec.edited {
		if err := s.audit(ctx, q, p, ec.tool, "proposal.edited", "proposal", row.ID.String(), map[string]any{
			"before": json.RawMessage(ec.cur.Arguments), "after": json.RawMessage(ec.args)}); err != nil {
			return Proposal{}, err
		}
		if _, err := s.record(ctx, q, p, receipts.KindCorrection, outcomeEdited, row, ""); err != nil {
			return Proposal{}, err
		}
	}
	a, err := s.openPacket(ctx, q, p, ec.tool, row.ID, ec.args, ec.d.constraints)
	if err != nil {
		return Proposal{}, err
	}
	if err := s.audit(ctx, q, p, ec.tool, "proposal.escalated", "proposal", row.ID.String(), map[string]any{
		"tool": ec.tool.Name, "state": ec.d.State, "action_class": ec.d.class, "layers": ec.d.Layers, "approval_id": a.ID}); err != nil {
		return Proposal{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit escalation: %w", err)
	}
	s.announce(row, true)
	out := fromRow(row)
	out.Packet = packetOf(a)
	return out, nil
}

// claim moves the proposal to applying (pending, or pending_approval for
// an approval) with the arguments that will run and the effect-time
// decision, in tx; an edit is audited with both versions.
func (s *Service) claim(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, ec effectCall, path policy.Path) (db.Proposal, error) {
	dj, err := ec.decisionJSON()
	if err != nil {
		return db.Proposal{}, err
	}
	var applied []byte
	if !sameJSON(ec.args, ec.cur.Arguments) {
		applied = ec.args
	}
	from, stored := StatusPending, PathHuman
	if path == policy.PathApproval {
		from, stored = StatusPendingApproval, PathApproval
	}
	claimed, err := q.ClaimProposal(ctx, db.ClaimProposalParams{ID: ec.cur.ID, WorkspaceID: ec.cur.WorkspaceID, AppliedArguments: applied, ResolvedByUserID: nullUUID(p.UserID),
		ApplyPath: pgtype.Text{String: stored, Valid: true}, FromStatus: from, EffectDecision: dj})
	if errors.Is(err, pgx.ErrNoRows) {
		tx.Rollback(ctx) // free the connection before reading through the pool
		return db.Proposal{}, s.notPending(ctx, p, ec.cur.ID)
	}
	if err != nil {
		return db.Proposal{}, fmt.Errorf("proposals: claim: %w", err)
	}
	if ec.edited && path == policy.PathOwner {
		if err := s.audit(ctx, q, p, ec.tool, "proposal.edited", "proposal", ec.cur.ID.String(), map[string]any{
			"before": json.RawMessage(ec.cur.Arguments), "after": json.RawMessage(ec.args)}); err != nil {
			return db.Proposal{}, err
		}
		if _, err := s.record(ctx, q, p, receipts.KindCorrection, outcomeEdited, claimed, ""); err != nil {
			return db.Proposal{}, err
		}
	}
	return claimed, nil
}

// run runs a claimed call and records its outcome. An in-database tool (and
// a dry run) runs in tx, which commits with the result: done or not
// started. An outside tool's claim commits first; it is then delivered with
// no transaction open and recorded in a new one.
func (s *Service) run(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, claimed db.Proposal, tool *tools.Tool, args json.RawMessage, ws tools.Workspace, path string, constraints []policy.Constraint) (Proposal, error) {
	dry := policy.DryRun(constraints)
	if tool.Caller && !dry {
		// Its caller runs it: the claim commits, and the call waits for
		// the caller's report (caller.go).
		return s.awaitCaller(ctx, tx, q, p, claimed, tool, path)
	}
	if dry || !tool.Outside() {
		result, failure, err := s.runInside(ctx, tx, q, p, claimed, tool, args, dry)
		if err != nil {
			return Proposal{}, err
		}
		row, err := s.finish(ctx, q, p, claimed, tool, path, result, failure, dry, false)
		if err != nil {
			return Proposal{}, err
		}
		return s.committed(ctx, tx, row, "result")
	}
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit claim: %w", err)
	}
	s.announce(claimed, false) // applying: the card says so while it runs
	return s.deliver(ctx, p, claimed, tool, args, ws, path)
}

// runInside runs an in-database tool in a savepoint of tx, so a tool that
// fails undoes only its own work and the failure is recorded with the claim.
func (s *Service) runInside(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, claimed db.Proposal, tool *tools.Tool, args json.RawMessage, dry bool) (result []byte, failure string, err error) {
	if dry {
		// dry_run_only: the executor does not run; the result says so.
		b, err := json.Marshal(map[string]any{"dry_run": true, "tool": tool.Name, "arguments": args,
			"note": "Not executed: a dry_run_only constraint applies."})
		if err != nil {
			return nil, "", fmt.Errorf("proposals: encode dry run: %w", err)
		}
		return b, "", nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("proposals: savepoint: %w", err)
	}
	out, execErr := tool.Execute(ctx, q.WithTx(sp), p.WorkspaceID, args)
	if execErr != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return nil, "", fmt.Errorf("proposals: roll back %s: %w", tool.Name, rerr)
		}
		return nil, s.failureText(tool, claimed, execErr), nil
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, "", fmt.Errorf("proposals: release savepoint: %w", err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "", fmt.Errorf("proposals: encode result: %w", err)
	}
	return redact(b, claimed.Constraints), "", nil
}

// failureText is what the caller reads of a tool's failure: its message
// when it is safe to show (a missing record), else a plain internal error
// (logged).
func (s *Service) failureText(tool *tools.Tool, claimed db.Proposal, err error) string {
	var safe *apperr.Error
	if errors.As(err, &safe) {
		return safe.Message
	}
	s.log.Error("tool failed", "tool", tool.Name, "proposal_id", claimed.ID, "err", err)
	return "Internal error while running the tool."
}

// deliver runs an outside tool whose claim has committed: under the tool's
// timeout and not cancelled by the caller going away (the claim is
// already taken, so the outcome must be recorded), then records the
// outcome in a new transaction.
func (s *Service) deliver(ctx context.Context, p auth.Principal, claimed db.Proposal, tool *tools.Tool, args json.RawMessage, ws tools.Workspace, path string) (Proposal, error) {
	record, derr := s.deliverOutside(ctx, tool, ws, args)
	ctx = context.WithoutCancel(ctx)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: begin record: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	var result []byte
	failure := ""
	if derr != nil {
		failure = s.failureText(tool, claimed, derr)
	} else {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return Proposal{}, fmt.Errorf("proposals: savepoint: %w", err)
		}
		out, rerr := record(ctx, q.WithTx(sp), p.WorkspaceID)
		if rerr != nil {
			// Delivered, but its details could not be written: the call
			// still took effect, and says so.
			s.log.Error("recording a delivery", "tool", tool.Name, "proposal_id", claimed.ID, "err", rerr)
			if err := sp.Rollback(ctx); err != nil {
				return Proposal{}, fmt.Errorf("proposals: roll back record: %w", err)
			}
			out = map[string]any{"delivered": true, "note": "Delivered; the details of the delivery could not be recorded."}
		} else if err := sp.Commit(ctx); err != nil {
			return Proposal{}, fmt.Errorf("proposals: release savepoint: %w", err)
		}
		if result, err = json.Marshal(out); err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode result: %w", err)
		}
		result = redact(result, claimed.Constraints)
	}
	row, err := s.finish(ctx, q, p, claimed, tool, path, result, failure, false, false)
	if err != nil {
		return Proposal{}, err
	}
	return s.committed(ctx, tx, row, "result")
}

// cancelForwarded marks a caller whose context ends only when it cancels
// the call (MCP's notifications/cancelled, or its session ending): not a
// connection dropped.
type cancelForwarded struct{}

// ForwardsCancellation marks ctx as a caller that cancels on purpose when
// it ends (the MCP gateway's), so that an upstream call it made is
// cancelled with it, and the upstream told.
func ForwardsCancellation(ctx context.Context) context.Context {
	return context.WithValue(ctx, cancelForwarded{}, true)
}

// cancelledUpstream is the failure of an upstream call its caller
// cancelled.
const cancelledUpstream = "Cancelled by the caller before the upstream answered; the upstream was told to stop (notifications/cancelled) and may have acted."

// deliverOutside runs an outside tool under its timeout and not cancelled
// by the caller going away (whatever happened must be recorded), except
// that an upstream's tool is cancelled, and the upstream told, when a
// caller marked by ForwardsCancellation cancels it; the failure then says
// so. It returns what Deliver returns.
func (s *Service) deliverOutside(caller context.Context, tool *tools.Tool, ws tools.Workspace, args json.RawMessage) (tools.Recorder, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(caller), tool.DeliverTimeout())
	defer cancel()
	forward, _ := caller.Value(cancelForwarded{}).(bool)
	if forward && tool.Upstream != "" {
		stop := context.AfterFunc(caller, cancel)
		defer stop()
	}
	record, err := tool.Deliver(ctx, ws, args)
	if err != nil && forward && tool.Upstream != "" && caller.Err() != nil {
		return nil, apperr.Errorf(apperr.ECONFLICT, "%s", cancelledUpstream)
	}
	return record, err
}

// finish moves applying → applied or failed and writes the audit row, in
// q's transaction.
func (s *Service) finish(ctx context.Context, q *db.Queries, p auth.Principal, claimed db.Proposal, tool *tools.Tool, path string, result []byte, failure string, dryRun, refused bool) (db.Proposal, error) {
	return s.finishWith(ctx, q, p, claimed, tool, path, result, failure, dryRun, refused, nil)
}

// finishWith is finish with more to say in the audit row (a caller's
// report: who reported it, the result's digest).
func (s *Service) finishWith(ctx context.Context, q *db.Queries, p auth.Principal, claimed db.Proposal, tool *tools.Tool, path string, result []byte, failure string, dryRun, refused bool,
	extra map[string]any) (db.Proposal, error) {
	status, action, data := StatusApplied, "proposal.applied", map[string]any{"path": path, "tool": claimed.Tool}
	for k, v := range extra {
		data[k] = v
	}
	if failure != "" {
		status, action = StatusFailed, "proposal.failed"
		data["error"] = failure
	}
	if dryRun {
		data["dry_run"] = true
	}
	markIrreversible(data, tool, dryRun)
	row, err := q.FinishProposal(ctx, db.FinishProposalParams{ID: claimed.ID, WorkspaceID: claimed.WorkspaceID, Status: status, Result: result,
		Error: pgtype.Text{String: failure, Valid: failure != ""}, DryRun: dryRun})
	if err != nil {
		return db.Proposal{}, fmt.Errorf("proposals: finish: %w", err)
	}
	if err := s.audit(ctx, q, p, tool, action, "proposal", claimed.ID.String(), data); err != nil {
		return db.Proposal{}, err
	}
	if err := s.executed(ctx, q, p, row, path, failure, refused); err != nil {
		return db.Proposal{}, err
	}
	return row, nil
}

// committed commits tx, in which the call's row came to be as row says,
// and tells the pages that show it: the end of every path that records
// an outcome in one transaction.
func (s *Service) committed(ctx context.Context, tx pgx.Tx, row db.Proposal, what string) (Proposal, error) {
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit %s: %w", what, err)
	}
	s.announce(row, false)
	return fromRow(row), nil
}

// markIrreversible marks the finishing audit row of an irreversible call
// that ran (or failed trying) with its authority: the notifications fold
// alerts the workspace's admins on every one (migration 50). A dry run
// ran nothing.
func markIrreversible(data map[string]any, tool *tools.Tool, dryRun bool) {
	if tool != nil && tool.Contract.Authority == policy.AuthorityIrreversible && !dryRun {
		data["authority"] = string(policy.AuthorityIrreversible)
	}
}

// allConstraints are the constraints a call runs under: the declared and
// the workspace's (from the decision) and those kept on the proposal.
func allConstraints(d decision, stored []policy.Constraint) []policy.Constraint {
	return append(slices.Clone(d.constraints), stored...)
}
