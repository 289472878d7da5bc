package proposals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// runAuto is the automatic path of a call whose effect lives in
// Gatehouse's database (or a dry run): in the transaction that decided it,
// the tool runs, then one statement records the proposal in its final
// state, its transcript line, its audit rows and its receipt
// (RecordAutoCall). A crash leaves it done or not started; a connection
// lost once the COMMIT is sent leaves the caller not knowing which (an
// OutcomeUnknownError naming the call's id). A tool that fails takes its
// own work with it: the transaction rolls back, and the failed call is
// recorded in a fresh one (a call that did nothing is not counted against
// rate limits). A database lost while the tool runs is not the tool
// failing: nothing is recorded, and the caller gets the error.
func (s *Service) runAuto(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, params db.InsertProposalParams,
	tool *tools.Tool, args json.RawMessage, d decision, created map[string]any, idem *Idem) (Proposal, error) {
	// Time-ordered (UUIDv7), like the database's default for proposals.
	id, err := uuid.NewV7()
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: id: %w", err)
	}
	dry := policy.DryRun(d.constraints)
	var result []byte
	failure := ""
	if dry {
		b, err := json.Marshal(map[string]any{"dry_run": true, "tool": tool.Name, "arguments": args,
			"note": "Not executed: a dry_run_only constraint applies."})
		if err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode dry run: %w", err)
		}
		result = b
	} else if out, execErr := tool.Execute(ctx, q, p.WorkspaceID, args); execErr != nil {
		if tx.Conn().IsClosed() {
			// The database went away, not the tool: its work went with
			// the transaction, and there is nothing to record (a failed
			// call would say the tool failed).
			return Proposal{}, fmt.Errorf("proposals: %s: %w", tool.Name, execErr)
		}
		failure = s.failureText(tool, db.Proposal{ID: id}, execErr)
		tx.Rollback(ctx)
		var err error
		if tx, err = s.pool.Begin(ctx); err != nil {
			return Proposal{}, fmt.Errorf("proposals: begin: %w", err)
		}
		defer tx.Rollback(ctx)
		q = s.q.WithTx(tx)
	} else {
		b, err := json.Marshal(out)
		if err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode result: %w", err)
		}
		result = redact(b, params.Constraints)
	}
	if ct, ok := tx.(*callTx); ok && !idem.links() {
		// The record is the transaction's last statement: it travels with
		// the COMMIT, in one round trip.
		out, err := s.recordAuto(ctx, db.New(ct.committing()), p, id, params, tool, result, failure, dry, created)
		if err != nil {
			return Proposal{}, unknownOutcome(id, err)
		}
		out.Decision, out.EffectDecision = &d.Decision, &d.Decision
		s.announce(announced(params), false)
		return out, nil
	}
	out, err := s.recordAuto(ctx, q, p, id, params, tool, result, failure, dry, created)
	if err != nil {
		return Proposal{}, err
	}
	if err := idem.link(ctx, q, out.ID); err != nil {
		return Proposal{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		// A COMMIT whose answer was lost: the caller is told that the call
		// (this id) may have been recorded.
		return Proposal{}, unknownOutcome(id, fmt.Errorf("proposals: commit: %w", err))
	}
	// The decision taken in this transaction is the one just stored (and
	// its effect-time decision): no need to decode what was encoded.
	out.Decision, out.EffectDecision = &d.Decision, &d.Decision
	s.announce(announced(params), false)
	return out, nil
}

// readOutside is the automatic path of a read by a tool whose effect is
// outside Gatehouse's database (an upstream's read tool). A read has no
// effect to run twice or to leave half done, so nothing is claimed before
// it: the deciding transaction commits (with what it counted), the tool is
// called with no transaction open, under its timeout and whether or not
// the caller is still there, and one statement then records the call in
// its final state, as runAuto does (RecordAutoCall), before the caller is
// answered. Before, the call was recorded as claimed, committed, called,
// and finished in a second transaction: two commits and the proposal
// written twice. A crash between the call and its record leaves a read
// that no one was answered about, and no record of it.
func (s *Service) readOutside(ctx context.Context, tx pgx.Tx, p auth.Principal, params db.InsertProposalParams,
	tool *tools.Tool, args json.RawMessage, d decision, created map[string]any, idem *Idem) (Proposal, error) {
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit decision: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: id: %w", err)
	}
	record, derr := s.deliverOutside(ctx, tool, d.ws, args)
	ctx = context.WithoutCancel(ctx)
	// The record's transaction begins with its first statement: when the
	// tool's recorder writes nothing (an upstream's answer) and no
	// idempotency key is linked, the call's record is one statement on its
	// own (RecordAutoCall is atomic), one round trip instead of three.
	rtx := s.lazyCall()
	defer rtx.Rollback(ctx)
	q := db.New(rtx)
	var result []byte
	failure := ""
	if derr != nil {
		failure = s.failureText(tool, db.Proposal{ID: id}, derr)
	} else {
		out, err := record(ctx, q, p.WorkspaceID)
		if err != nil {
			return Proposal{}, fmt.Errorf("proposals: record %s: %w", tool.Name, err)
		}
		if result, err = json.Marshal(out); err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode result: %w", err)
		}
		result = redact(result, params.Constraints)
	}
	if !rtx.begun() && !idem.links() {
		out, err := s.recordAutoBy(p, id, params, tool, result, failure, false, created, func(rec db.RecordAutoCallParams) (time.Time, error) {
			return s.recordOutside(ctx, rec)
		})
		if err != nil {
			return Proposal{}, s.scopeGone(p, id, tool, unknownOutcome(id, err))
		}
		out.Decision, out.EffectDecision = &d.Decision, &d.Decision
		s.announce(announced(params), false)
		return out, nil
	}
	out, err := s.recordAuto(ctx, q, p, id, params, tool, result, failure, false, created)
	if err != nil {
		return Proposal{}, s.scopeGone(p, id, tool, err)
	}
	if err := idem.link(ctx, q, out.ID); err != nil {
		return Proposal{}, err
	}
	if err := rtx.Commit(ctx); err != nil {
		return Proposal{}, unknownOutcome(id, fmt.Errorf("proposals: commit: %w", err))
	}
	out.Decision, out.EffectDecision = &d.Decision, &d.Decision
	s.announce(announced(params), false)
	return out, nil
}

// scopeGone is err, or, when the call's record was refused because its
// conversation or notebook was deleted while the tool ran outside, an
// error that says so (404, not an internal error): the tool was called,
// its answer is not returned, and nothing of the call is recorded, since
// what it was recorded in is gone. The log keeps that it ran.
func (s *Service) scopeGone(p auth.Principal, id uuid.UUID, tool *tools.Tool, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23503" { // foreign_key_violation
		return err
	}
	scope := "conversation"
	switch pe.ConstraintName {
	case "proposals_conversation_scope_fkey":
	case "proposals_notebook_scope_fkey":
		scope = "notebook"
	default:
		return err
	}
	s.log.Warn("proposals: a call ran outside but its "+scope+" was deleted meanwhile; not recorded",
		"proposal", id, "tool", tool.Name, "workspace", p.WorkspaceID, "user", p.UserID)
	return apperr.Errorf(apperr.ENOTFOUND, "The %s was deleted while this call was at %s: it ran, but its answer is not returned and the call is not recorded.", scope, tool.Name)
}

// announced is what the announcement of a recorded call needs to know.
func announced(params db.InsertProposalParams) db.Proposal {
	return db.Proposal{WorkspaceID: params.WorkspaceID, ConversationID: params.ConversationID, NotebookID: params.NotebookID,
		OwnerID: params.OwnerID, ProposedByUserID: params.ProposedByUserID}
}

// recordAuto writes an automatic call's record in one statement and
// returns the call as recorded (its decisions are the caller's to set).
func (s *Service) recordAuto(ctx context.Context, q *db.Queries, p auth.Principal, id uuid.UUID, params db.InsertProposalParams,
	tool *tools.Tool, result []byte, failure string, dry bool, created map[string]any) (Proposal, error) {
	return s.recordAutoBy(p, id, params, tool, result, failure, dry, created, func(rec db.RecordAutoCallParams) (time.Time, error) {
		return q.RecordAutoCall(ctx, rec)
	})
}

// recordAutoBy is recordAuto with the record written by write.
func (s *Service) recordAutoBy(p auth.Principal, id uuid.UUID, params db.InsertProposalParams, tool *tools.Tool, result []byte, failure string,
	dry bool, created map[string]any, write func(db.RecordAutoCallParams) (time.Time, error)) (Proposal, error) {
	rec, row, err := s.autoRecord(p, id, params, tool, result, failure, dry, created)
	if err != nil {
		return Proposal{}, err
	}
	createdAt, err := write(rec)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: record call: %w", err)
	}
	return recordedAt(row, createdAt), nil
}

// outsideRecord is the record of an outside read, waiting to be written
// (recordOutside).
type outsideRecord struct {
	ctx       context.Context
	rec       db.RecordAutoCallParams
	createdAt time.Time
	err       error
}

// recordOutside writes the record of an outside read that ran at once:
// one statement on its own (RecordAutoCall, atomic without a transaction
// around it). Records that arrive while others are being written share
// the next statement (RecordAutoCalls: the same rows, one commit for all
// of them, as the group's transactions do for in-database calls), so that
// many agents' reads of upstreams do not cost a commit and its WAL flush
// each. No record can fail another: a statement the server refuses wrote
// nothing, and each of its records is written again alone; a connection
// lost after the statement was sent leaves every one of them unknown, as
// it would have alone.
func (s *Service) recordOutside(ctx context.Context, rec db.RecordAutoCallParams) (time.Time, error) {
	if s.outside == nil {
		return s.q.RecordAutoCall(ctx, rec)
	}
	// Not written until a write says so (one that panicked says nothing).
	r := &outsideRecord{ctx: ctx, rec: rec, err: errNotRecorded}
	s.outside.do(r)
	return r.createdAt, r.err
}

// errNotRecorded is a record whose statement never said it was written.
var errNotRecorded = errors.New("proposals: the call's record was not written")

// writeOutsideRecords writes a batch of outside reads' records (see
// recordOutside).
func (s *Service) writeOutsideRecords(recs []*outsideRecord, _ func()) {
	if len(recs) == 1 {
		r := recs[0]
		r.createdAt, r.err = s.q.RecordAutoCall(r.ctx, r.rec)
		return
	}
	// Every record's caller waits for it: none going away cancels the
	// others' (readOutside's contexts outlive their callers already).
	ctx := context.WithoutCancel(recs[0].ctx)
	rows := make([]autoRow, len(recs))
	for i, r := range recs {
		rows[i] = autoRowOf(i, r.rec)
	}
	calls, err := json.Marshal(rows)
	if err != nil {
		for _, r := range recs {
			r.err = fmt.Errorf("proposals: encode calls: %w", err)
		}
		return
	}
	res, err := s.q.RecordAutoCalls(ctx, calls)
	switch {
	case err == nil && int(res.Recorded) == len(recs):
		for _, r := range recs {
			r.createdAt, r.err = res.CreatedAt, nil
		}
		return
	case err == nil:
		// Cannot happen with the statement as written; if it did, rows that
		// do not match the calls were committed.
		err = fmt.Errorf("%w: %d recorded of %d", ErrOutcomeUnknown, res.Recorded, len(recs))
	}
	if errors.Is(err, ErrOutcomeUnknown) || commitUnknown(err) {
		for _, r := range recs {
			r.err = err
		}
		return
	}
	s.log.Debug("outside reads: records written alone", "records", len(recs), "err", err)
	for _, r := range recs {
		r.createdAt, r.err = s.q.RecordAutoCall(ctx, r.rec)
	}
}

// recordedAt is the call as fromRow would read it back: claimed and
// resolved at the transaction's time, like created_at.
func recordedAt(row db.Proposal, createdAt time.Time) Proposal {
	row.CreatedAt, row.ClaimedAt, row.ResolvedAt = createdAt, &createdAt, &createdAt
	return fromRow(row)
}

// autoRecord is an automatic call's record: what RecordAutoCall (or, for
// calls committed together, RecordAutoCalls) writes, and the proposal
// row it stores, but for the transaction's time.
func (s *Service) autoRecord(p auth.Principal, id uuid.UUID, params db.InsertProposalParams,
	tool *tools.Tool, result []byte, failure string, dry bool, created map[string]any) (db.RecordAutoCallParams, db.Proposal, error) {
	status, action := StatusApplied, "proposal.applied"
	path := PathAuto
	if underGrant(created) {
		path = PathGrant // a grant let it through: said so in its audit row and receipt
	}
	finished := map[string]any{"path": path, "tool": tool.Name}
	if failure != "" {
		status, action = StatusFailed, "proposal.failed"
		finished["error"] = failure
	}
	if dry {
		finished["dry_run"] = true
	}
	markIrreversible(finished, tool, dry)
	if failure == "" {
		tools.MarkPIIRead(finished, tool, params.Arguments, result) // what a read read of personal data (names, never values)
	}
	createdJSON, err := json.Marshal(created)
	if err != nil {
		return db.RecordAutoCallParams{}, db.Proposal{}, fmt.Errorf("proposals: encode audit: %w", err)
	}
	finishedJSON, err := json.Marshal(finished)
	if err != nil {
		return db.RecordAutoCallParams{}, db.Proposal{}, fmt.Errorf("proposals: encode audit: %w", err)
	}
	// The receipt names the call as it is recorded.
	shape := db.Proposal{ID: id, WorkspaceID: params.WorkspaceID, Tool: params.Tool, ActionClass: params.ActionClass,
		Decision: params.Decision, EffectDecision: params.Decision, Arguments: params.Arguments, Rationale: params.Rationale}
	now := time.Now()
	// The content hash is the sequencer's to compute, in its batch; the
	// arguments are the call's as compact checked them a moment ago.
	rc, err := receipts.PrepareFresh(params.WorkspaceID, s.receiptFor(p, receipts.KindExecution, receiptPath(path), shape, failure), now)
	if err != nil {
		return db.RecordAutoCallParams{}, db.Proposal{}, err
	}
	rec := db.RecordAutoCallParams{
		ID: id, WorkspaceID: params.WorkspaceID, OwnerID: params.OwnerID, ConversationID: params.ConversationID, NotebookID: params.NotebookID,
		ProposedByTokenID: params.ProposedByTokenID, ProposedByKind: params.ProposedByKind, Tool: params.Tool, Effect: params.Effect,
		Arguments: params.Arguments, Rationale: params.Rationale, PermissionMode: params.PermissionMode, TrustLevel: params.TrustLevel,
		Disposition: params.Disposition, Authority: params.Authority, Risk: params.Risk, ActionClass: params.ActionClass, State: params.State,
		Decision: params.Decision, Constraints: params.Constraints, Status: status, Result: result,
		Error: pgtype.Text{String: failure, Valid: failure != ""}, DryRun: dry, DecisionInput: params.DecisionInput,
		ActorKind: audit.KindOf(p), RetentionUntil: now.Add(tool.Contract.Retention), CreatedData: createdJSON,
		FinishedAction: action, FinishedData: finishedJSON,
		ReceiptID: rc.ID, ReceiptContent: rc.Content, ReceiptHash: rc.ContentHash, ReceiptMetadata: rc.Metadata,
	}
	row := db.Proposal{ID: id, WorkspaceID: params.WorkspaceID, ConversationID: params.ConversationID, NotebookID: params.NotebookID,
		Tool: params.Tool, Effect: params.Effect, Arguments: params.Arguments, Rationale: params.Rationale,
		PermissionMode: params.PermissionMode, TrustLevel: params.TrustLevel, Disposition: params.Disposition,
		Authority: params.Authority, Risk: params.Risk, ActionClass: params.ActionClass, DryRun: dry, Status: status, Result: result,
		Error: pgtype.Text{String: failure, Valid: failure != ""}, ApplyPath: pgtype.Text{String: PathAuto, Valid: true},
		ProposedByKind: params.ProposedByKind}
	return rec, row, nil
}
