// Package feedback is agents telling us where they got stuck: what they
// tried, what they expected and what happened. Agents and users submit it
// (over REST or as the MCP tool submit_feedback, through the same Submit);
// approvers and admins triage it through a small status workflow, each
// change audited.
package feedback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/cursor"
)

// Severities of a feedback item.
const (
	SeverityLow  = "low"
	SeverityMed  = "med"
	SeverityHigh = "high"
)

// Statuses of a feedback item: new → triaged → planned | done | wontfix
// (and planned → done | wontfix).
const (
	StatusNew     = "new"
	StatusTriaged = "triaged"
	StatusPlanned = "planned"
	StatusDone    = "done"
	StatusWontfix = "wontfix"
)

// Statuses lists every status in workflow order.
var Statuses = []string{StatusNew, StatusTriaged, StatusPlanned, StatusDone, StatusWontfix}

// Severities lists every severity, least first.
var Severities = []string{SeverityLow, SeverityMed, SeverityHigh}

// next is the status workflow: the statuses each status may move to.
var next = map[string][]string{
	StatusNew:     {StatusTriaged},
	StatusTriaged: {StatusPlanned, StatusDone, StatusWontfix},
	StatusPlanned: {StatusDone, StatusWontfix},
}

// NextStatuses returns the statuses an item in status may move to.
func NextStatuses(status string) []string { return next[status] }

// CanMove reports whether the workflow allows from → to.
func CanMove(from, to string) bool {
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Limits on the fields, in characters.
const (
	MaxText         = 2000 // attempted_action, expected_outcome, actual_outcome, admin note
	MaxErrorSeen    = 4000
	MaxToolName     = 200
	MinRationale    = 10
	MaxRationale    = 500
	defaultListDays = 90
)

// Input is a feedback item as its submitter sent it.
type Input struct {
	AttemptedAction string
	ExpectedOutcome string
	ActualOutcome   string
	ToolCalled      string
	ErrorSeen       string
	Severity        string
	Rationale       string
	// ProposalID (optional) must be a proposal of the submitter's.
	ProposalID uuid.UUID
}

// Item is a stored feedback item.
type Item struct {
	ID              uuid.UUID
	SubmittedBy     string // "agent" or "user"
	TokenName       string
	AttemptedAction string
	ExpectedOutcome string
	ActualOutcome   string
	ToolCalled      string
	// ToolKnown is false when ToolCalled names no tool of the registry
	// (kept as sent: the agent may have guessed a name).
	ToolKnown  bool
	ErrorSeen  string
	Severity   string
	Rationale  string
	ProposalID uuid.UUID
	// ApprovalID is the approval packet of the proposal, if it has one.
	ApprovalID uuid.UUID
	Status     string
	AdminNote  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Filter narrows the triage list; empty fields match everything.
type Filter struct {
	Since    time.Time // zero: the last 90 days
	Severity string
	Tool     string
	Status   string
}

// Validate checks the filter's severity and status; the error names each
// field at fault.
func (f Filter) Validate() error {
	var fields []apperr.FieldError
	if f.Severity != "" && !slices.Contains(Severities, f.Severity) {
		fields = append(fields, apperr.FieldError{Field: "severity", Message: "must be low, med or high"})
	}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		fields = append(fields, apperr.FieldError{Field: "status", Message: "must be one of " + strings.Join(Statuses, ", ")})
	}
	if len(fields) > 0 {
		return apperr.Invalid("Invalid filter.", fields...)
	}
	return nil
}

// since is where the filter's window starts: its since, or the last 90 days.
func (f Filter) since(now time.Time) time.Time {
	if f.Since.IsZero() {
		return now.AddDate(0, 0, -defaultListDays)
	}
	return f.Since
}

// Service stores and triages feedback.
type Service struct {
	pool  *pgxpool.Pool
	q     *db.Queries
	known func(tool string) bool

	key *cursor.Key // signs the list's cursors
}

// NewService returns the service; known says whether a tool name is one of
// the registry's.
func NewService(pool *pgxpool.Pool, known func(tool string) bool) *Service {
	q := db.New(pool)
	return &Service{pool: pool, q: q, known: known, key: cursor.NewKey(q)}
}

// ErrNotFound is a feedback item that does not exist in the caller's workspace.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such feedback item.")

var errTriagers = apperr.Errorf(apperr.EFORBIDDEN, "Feedback is triaged by approvers and admins.")

// MayTriage says whether the caller may read and triage the workspace's
// feedback (approvers and admins, not their agents): EFORBIDDEN otherwise.
func MayTriage(p auth.Principal) error { return triager(p) }

func triager(p auth.Principal) error {
	if !p.CanApprove() || p.IsAgent() {
		return errTriagers
	}
	return nil
}

// checkLength names field when text has fewer than min or more than max characters.
func checkLength(fields []apperr.FieldError, field, text string, min, max int) []apperr.FieldError {
	n := utf8.RuneCountInString(text)
	switch {
	case n < min && min == 1:
		return append(fields, apperr.FieldError{Field: field, Message: fmt.Sprintf("is required (1 to %d characters)", max)})
	case n < min || n > max:
		if min == 0 {
			return append(fields, apperr.FieldError{Field: field, Message: fmt.Sprintf("must have at most %d characters", max)})
		}
		return append(fields, apperr.FieldError{Field: field, Message: fmt.Sprintf("must have %d to %d characters", min, max)})
	}
	return fields
}

// Validate checks an input and returns it trimmed; the error names every
// field at fault.
func Validate(in Input) (Input, error) {
	in.AttemptedAction = strings.TrimSpace(in.AttemptedAction)
	in.ExpectedOutcome = strings.TrimSpace(in.ExpectedOutcome)
	in.ActualOutcome = strings.TrimSpace(in.ActualOutcome)
	in.ToolCalled = strings.TrimSpace(in.ToolCalled)
	in.ErrorSeen = strings.TrimSpace(in.ErrorSeen)
	in.Rationale = strings.TrimSpace(in.Rationale)
	var fields []apperr.FieldError
	fields = checkLength(fields, "attempted_action", in.AttemptedAction, 1, MaxText)
	fields = checkLength(fields, "expected_outcome", in.ExpectedOutcome, 1, MaxText)
	fields = checkLength(fields, "actual_outcome", in.ActualOutcome, 1, MaxText)
	fields = checkLength(fields, "tool_called", in.ToolCalled, 0, MaxToolName)
	fields = checkLength(fields, "error_seen", in.ErrorSeen, 0, MaxErrorSeen)
	if in.Severity != SeverityLow && in.Severity != SeverityMed && in.Severity != SeverityHigh {
		fields = append(fields, apperr.FieldError{Field: "severity", Message: "must be low, med or high"})
	}
	fields = checkLength(fields, "rationale", in.Rationale, MinRationale, MaxRationale)
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Field
		}
		return in, apperr.Invalid("Invalid fields: "+strings.Join(names, ", ")+".", fields...)
	}
	return in, nil
}

// Submit stores a feedback item from an agent or a user, with status new.
func (s *Service) Submit(ctx context.Context, p auth.Principal, in Input) (Item, error) {
	in, err := Validate(in)
	if err != nil {
		return Item{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Item{}, fmt.Errorf("feedback: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if in.ProposalID != uuid.Nil {
		if _, err := q.ProposalOwnedBy(ctx, db.ProposalOwnedByParams{ID: in.ProposalID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID}); errors.Is(err, pgx.ErrNoRows) {
			return Item{}, apperr.Invalid("The proposal_id is not a proposal of yours.", apperr.FieldError{Field: "proposal_id", Message: "is not a proposal of yours"})
		} else if err != nil {
			return Item{}, fmt.Errorf("feedback: read proposal: %w", err)
		}
	}
	kind := "user"
	if p.IsAgent() {
		kind = "agent"
	}
	row, err := q.InsertFeedback(ctx, db.InsertFeedbackParams{
		WorkspaceID: p.WorkspaceID, SubmittedByUserID: p.UserID, SubmittedByTokenID: nullUUID(p.TokenID), SubmittedByKind: kind,
		TokenName: p.TokenName, AttemptedAction: in.AttemptedAction, ExpectedOutcome: in.ExpectedOutcome, ActualOutcome: in.ActualOutcome,
		ToolCalled: in.ToolCalled, ToolKnown: in.ToolCalled == "" || (s.known != nil && s.known(in.ToolCalled)), ErrorSeen: in.ErrorSeen,
		Severity: in.Severity, Rationale: in.Rationale, ProposalID: nullUUID(in.ProposalID),
	})
	if err != nil {
		return Item{}, fmt.Errorf("feedback: insert: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "feedback.submitted", "feedback", row.ID.String(),
		map[string]any{"severity": row.Severity, "tool_called": row.ToolCalled, "tool_known": row.ToolKnown, "rationale": row.Rationale}); err != nil {
		return Item{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Item{}, fmt.Errorf("feedback: commit: %w", err)
	}
	return fromRow(row, uuid.NullUUID{}), nil
}

// SetStatus moves an item along the workflow with an admin note
// (approvers and admins), audited; a move the workflow does not allow is
// invalid.
func (s *Service) SetStatus(ctx context.Context, p auth.Principal, id uuid.UUID, status, note string) (Item, error) {
	if err := triager(p); err != nil {
		return Item{}, err
	}
	note = strings.TrimSpace(note)
	if utf8.RuneCountInString(note) > MaxText {
		return Item{}, apperr.Invalid("The note is too long.", apperr.FieldError{Field: "note", Message: fmt.Sprintf("must have at most %d characters", MaxText)})
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Item{}, fmt.Errorf("feedback: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetFeedbackForUpdate(ctx, db.GetFeedbackForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, ErrNotFound
	} else if err != nil {
		return Item{}, fmt.Errorf("feedback: read: %w", err)
	}
	approval := cur.ApprovalID
	if !CanMove(cur.Feedback.Status, status) {
		allowed := NextStatuses(cur.Feedback.Status)
		msg := fmt.Sprintf("cannot move from %s to %s", cur.Feedback.Status, status)
		if len(allowed) > 0 {
			msg += " (allowed: " + strings.Join(allowed, ", ") + ")"
		}
		return Item{}, apperr.Invalid("The status "+msg+".", apperr.FieldError{Field: "status", Message: msg})
	}
	if note == "" {
		note = cur.Feedback.AdminNote
	}
	row, err := q.SetFeedbackStatus(ctx, db.SetFeedbackStatusParams{ID: id, WorkspaceID: p.WorkspaceID, Status: status, AdminNote: note})
	if err != nil {
		return Item{}, fmt.Errorf("feedback: set status: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "feedback.status_changed", "feedback", id.String(),
		map[string]any{"old": cur.Feedback.Status, "new": status, "note": note}); err != nil {
		return Item{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Item{}, fmt.Errorf("feedback: commit: %w", err)
	}
	return fromRow(row, approval), nil
}

// Get returns one item of the workspace (approvers and admins).
func (s *Service) Get(ctx context.Context, p auth.Principal, id uuid.UUID) (Item, error) {
	if err := triager(p); err != nil {
		return Item{}, err
	}
	r, err := s.q.GetFeedback(ctx, db.GetFeedbackParams{ID: id, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, ErrNotFound
	} else if err != nil {
		return Item{}, fmt.Errorf("feedback: read: %w", err)
	}
	return fromRow(r.Feedback, r.ApprovalID), nil
}

func fromRow(r db.Feedback, approval uuid.NullUUID) Item {
	return Item{ID: r.ID, SubmittedBy: r.SubmittedByKind, TokenName: r.TokenName, AttemptedAction: r.AttemptedAction,
		ExpectedOutcome: r.ExpectedOutcome, ActualOutcome: r.ActualOutcome, ToolCalled: r.ToolCalled, ToolKnown: r.ToolKnown,
		ErrorSeen: r.ErrorSeen, Severity: r.Severity, Rationale: r.Rationale, ProposalID: r.ProposalID.UUID, ApprovalID: approval.UUID,
		Status: r.Status, AdminNote: r.AdminNote, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func nullUUID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }
