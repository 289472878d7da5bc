package trust

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Service records explicit evidence and violations, keeps thresholds, and
// reads posteriors. The evidence of outcomes is written by the proposals
// service, in the outcome's own transaction (Record).
type Service struct {
	pool    *pgxpool.Pool
	q       *db.Queries
	classes *policy.ClassRegistry
	now     func() time.Time
}

// NewService returns the trust service; classes are the action classes
// evidence may name (the tool registry's).
func NewService(pool *pgxpool.Pool, classes *policy.ClassRegistry) *Service {
	return &Service{pool: pool, q: db.New(pool), classes: classes, now: time.Now}
}

// LatestPerClass is how many evidence rows the overview shows per class.
const LatestPerClass = 20

// DecisionWindow is how far back the overview's time to decision looks.
const DecisionWindow = 90 * 24 * time.Hour

// maxViolations bounds a list of violations.
const maxViolations = 200

// ProvenanceOf is where a caller's evidence comes from: an agent's is
// model-inferred (and never upgraded), a connector token's is a
// connector's, a person's (a session or their user token) is the
// principal's.
func ProvenanceOf(p auth.Principal) Provenance {
	switch {
	case p.IsAgent():
		return ProvenanceModelInferred
	case p.Connector:
		return ProvenanceConnector
	}
	return ProvenancePrincipal
}

// isPerson reports whether a person acts: a session or their own user
// token, not an agent, a connector or the system.
func isPerson(p auth.Principal) bool {
	return p.UserID != uuid.Nil && !p.IsAgent() && !p.Connector
}

// EvidenceRecord is one stored piece of evidence.
type EvidenceRecord struct {
	ID               int64
	ActionClass      string
	Label            Label
	Provenance       Provenance
	DecisionWeight   float64
	ProvenanceWeight float64
	Weight           float64
	ReceiptID        uuid.UUID
	ProposalID       uuid.UUID
	RecordedBy       uuid.UUID
	Note             string
	CreatedAt        time.Time
	// The scope of the proposal it is about, when known, for a link.
	ConversationID, NotebookID uuid.UUID
}

// ExplicitEvidence is a judgment a caller records themselves.
type ExplicitEvidence struct {
	ActionClass string
	Label       string
	Note        string
	ProposalID  uuid.UUID
	ReceiptID   uuid.UUID
}

// explicitLabels are the labels a caller may record (a violation is
// flagged on its receipt instead).
func explicitLabels() []string {
	var out []string
	for l := range DecisionWeights {
		if l != LabelViolation {
			out = append(out, string(l))
		}
	}
	slices.Sort(out)
	return out
}

// class canonicalises class and checks the registry knows it.
func (s *Service) class(class string) (string, bool) {
	c, err := policy.CanonicalClass(class)
	if err != nil {
		return "", false
	}
	if _, ok := s.classes.Group(c); !ok {
		return "", false
	}
	return c, true
}

func errUnknownClass(class string) error {
	return apperr.Errorf(apperr.ENOTFOUND, "No action class is named %q.", class)
}

func invalidField(field, message string) error {
	return apperr.Invalid(fmt.Sprintf("The field %s %s.", field, message), apperr.FieldError{Field: field, Message: message})
}

// RecordExplicit records a caller's own judgment on a class (POST
// /api/v1/evidence), weighed by where it comes from (ProvenanceOf). An
// agent must name the proposal it judges and judges each proposal once, so
// it cannot talk its own class up with a stream of approvals. Audited;
// it writes no receipt (it records a judgment, not an outcome).
func (s *Service) RecordExplicit(ctx context.Context, p auth.Principal, in ExplicitEvidence) (EvidenceRecord, error) {
	if p.UserID == uuid.Nil {
		return EvidenceRecord{}, apperr.Errorf(apperr.EFORBIDDEN, "Evidence is recorded by a user, an agent or a connector.")
	}
	var errs []apperr.FieldError
	class, ok := s.class(in.ActionClass)
	if !ok {
		errs = append(errs, apperr.FieldError{Field: "action_class", Message: "is not a known action class"})
	}
	label := Label(in.Label)
	if _, known := DecisionWeights[label]; !known || label == LabelViolation {
		msg := "must be one of " + strings.Join(explicitLabels(), ", ")
		if label == LabelViolation {
			msg = "violation is flagged on the receipt (POST /api/v1/receipts/{id}/violation)"
		}
		errs = append(errs, apperr.FieldError{Field: "label", Message: msg})
	}
	if utf8.RuneCountInString(in.Note) > 500 {
		errs = append(errs, apperr.FieldError{Field: "note", Message: "must have at most 500 characters"})
	}
	prov := ProvenanceOf(p)
	if prov == ProvenanceModelInferred && in.ProposalID == uuid.Nil {
		errs = append(errs, apperr.FieldError{Field: "proposal_id", Message: "is required from an agent: it judges a call it can name"})
	}
	if len(errs) > 0 {
		names := make([]string, len(errs))
		for i, e := range errs {
			names[i] = e.Field
		}
		return EvidenceRecord{}, apperr.Invalid("Invalid fields: "+strings.Join(names, ", ")+". Nothing was recorded.", errs...)
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return EvidenceRecord{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if in.ProposalID != uuid.Nil {
		pc, err := q.GetProposalActionClass(ctx, db.GetProposalActionClassParams{ID: in.ProposalID, WorkspaceID: p.WorkspaceID})
		if errors.Is(err, pgx.ErrNoRows) {
			return EvidenceRecord{}, invalidField("proposal_id", "names no proposal of this workspace")
		}
		if err != nil {
			return EvidenceRecord{}, fmt.Errorf("trust: read proposal: %w", err)
		}
		if pc.Valid && pc.String != class {
			return EvidenceRecord{}, invalidField("proposal_id", fmt.Sprintf("is a call of class %s, not %s", pc.String, class))
		}
		if prov == ProvenanceModelInferred {
			if err := q.LockEvidenceForProposal(ctx, in.ProposalID); err != nil {
				return EvidenceRecord{}, fmt.Errorf("trust: lock: %w", err)
			}
			n, err := q.CountEvidenceForProposal(ctx, db.CountEvidenceForProposalParams{WorkspaceID: p.WorkspaceID,
				ProposalID: uuid.NullUUID{UUID: in.ProposalID, Valid: true}, Provenance: string(prov)})
			if err != nil {
				return EvidenceRecord{}, fmt.Errorf("trust: count evidence: %w", err)
			}
			if n > 0 {
				return EvidenceRecord{}, apperr.Errorf(apperr.ECONFLICT, "An agent has judged this proposal already; it judges each call once.")
			}
		}
	}
	if in.ReceiptID != uuid.Nil {
		r, err := q.GetReceiptForTrust(ctx, db.GetReceiptForTrustParams{ID: in.ReceiptID, WorkspaceID: p.WorkspaceID})
		if errors.Is(err, pgx.ErrNoRows) {
			return EvidenceRecord{}, invalidField("receipt_id", "names no receipt of this workspace")
		}
		if err != nil {
			return EvidenceRecord{}, fmt.Errorf("trust: read receipt: %w", err)
		}
		if r.ActionClass.Valid && r.ActionClass.String != class {
			return EvidenceRecord{}, invalidField("receipt_id", fmt.Sprintf("records a call of class %s, not %s", r.ActionClass.String, class))
		}
	}
	e := Evidence{WorkspaceID: p.WorkspaceID, ActionClass: class, Label: label, Provenance: prov, ReceiptID: in.ReceiptID,
		ProposalID: in.ProposalID, RecordedBy: p.UserID, Note: in.Note}
	d, pw, w, err := e.Weight()
	if err != nil {
		return EvidenceRecord{}, err
	}
	row, err := q.InsertExplicitEvidence(ctx, db.InsertExplicitEvidenceParams{WorkspaceID: e.WorkspaceID, ActionClass: class, Label: string(label),
		Provenance: string(prov), DecisionWeight: d, ProvenanceWeight: pw, Weight: w, ReceiptID: nullID(in.ReceiptID), ProposalID: nullID(in.ProposalID),
		RecordedBy: nullID(p.UserID), Note: pgtype.Text{String: in.Note, Valid: in.Note != ""}})
	if err != nil {
		return EvidenceRecord{}, fmt.Errorf("trust: record evidence: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "trust.evidence_recorded", "action_class", class, map[string]any{
		"evidence_id": row.ID, "label": label, "provenance": prov, "weight": w, "proposal_id": optionalID(in.ProposalID), "receipt_id": optionalID(in.ReceiptID),
	}); err != nil {
		return EvidenceRecord{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return EvidenceRecord{}, fmt.Errorf("trust: commit: %w", err)
	}
	return evidenceFromRow(row), nil
}

func nullID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

func optionalID(id uuid.UUID) any {
	if id == uuid.Nil {
		return nil
	}
	return id.String()
}

func evidenceFromRow(r db.Evidence) EvidenceRecord {
	return EvidenceRecord{ID: r.ID, ActionClass: r.ActionClass, Label: Label(r.Label), Provenance: Provenance(r.Provenance), DecisionWeight: r.DecisionWeight,
		ProvenanceWeight: r.ProvenanceWeight, Weight: r.Weight, ReceiptID: r.ReceiptID.UUID, ProposalID: r.ProposalID.UUID, RecordedBy: r.RecordedBy.UUID,
		Note: r.Note.String, CreatedAt: r.CreatedAt}
}

// Category is what kind of harm a violation was.
type Category string

// Violation categories.
const (
	CategorySafetyIncident Category = "safety_incident"
	CategoryLeak           Category = "leak"
	CategoryWrongRecipient Category = "wrong_recipient"
	CategoryOther          Category = "other"
)

// Valid reports whether c is a known category.
func (c Category) Valid() bool {
	switch c {
	case CategorySafetyIncident, CategoryLeak, CategoryWrongRecipient, CategoryOther:
		return true
	}
	return false
}

// Violation is a receipt flagged as harm: while it is open, every call of
// its class waits for review.
type Violation struct {
	ID          uuid.UUID
	ActionClass string
	// ReceiptID is the receipt flagged.
	ReceiptID      uuid.UUID
	Category       Category
	Reason         string
	FlaggedBy      uuid.UUID
	FlaggedByEmail string
	CreatedAt      time.Time
	ClearedAt      *time.Time
	ClearedBy      uuid.UUID
	ClearedByEmail string
	ClearNote      string
}

// Open reports whether the violation is not cleared.
func (v Violation) Open() bool { return v.ClearedAt == nil }

// MayClear reports whether p may clear v: the principal, which here means
// an admin of the workspace or the person who flagged it, in person or
// with their user token; never an agent or a connector.
func (v Violation) MayClear(p auth.Principal) bool {
	return isPerson(p) && (p.IsAdmin() || (v.FlaggedBy != uuid.Nil && v.FlaggedBy == p.UserID))
}

func violationFromRow(r db.TrustViolation) Violation {
	return Violation{ID: r.ID, ActionClass: r.ActionClass, ReceiptID: r.ReceiptID.UUID, Category: Category(r.Category), Reason: r.Reason,
		FlaggedBy: r.FlaggedBy.UUID, CreatedAt: r.CreatedAt, ClearedAt: r.ClearedAt, ClearedBy: r.ClearedBy.UUID, ClearNote: r.ClearNote.String}
}

func checkText(field, s string) *apperr.FieldError {
	n := utf8.RuneCountInString(strings.TrimSpace(s))
	if n == 0 || utf8.RuneCountInString(s) > 500 {
		return &apperr.FieldError{Field: field, Message: "must have 1 to 500 characters"}
	}
	return nil
}

// FlagViolation flags a receipt as a violation of trust (any person of the
// workspace; not agents or connectors). In one transaction: the violation
// on the receipt's action class (which suspends the class until it is
// cleared), evidence "violation" (−1, the principal's) and a violation
// receipt; audited.
func (s *Service) FlagViolation(ctx context.Context, p auth.Principal, receiptID uuid.UUID, category, reason string) (Violation, error) {
	if !isPerson(p) {
		return Violation{}, apperr.Errorf(apperr.EFORBIDDEN, "Only a person flags a violation; agents and connectors cannot.")
	}
	var errs []apperr.FieldError
	if !Category(category).Valid() {
		errs = append(errs, apperr.FieldError{Field: "category", Message: "must be safety_incident, leak, wrong_recipient or other"})
	}
	if fe := checkText("reason", reason); fe != nil {
		errs = append(errs, *fe)
	}
	if len(errs) > 0 {
		return Violation{}, apperr.Invalid("The violation is incomplete; nothing was flagged.", errs...)
	}
	reason = strings.TrimSpace(reason)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Violation{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	r, err := q.GetReceiptForTrust(ctx, db.GetReceiptForTrustParams{ID: receiptID, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Violation{}, apperr.Errorf(apperr.ENOTFOUND, "No receipt of this workspace has that id.")
	}
	if err != nil {
		return Violation{}, fmt.Errorf("trust: read receipt: %w", err)
	}
	if r.Kind == receipts.KindViolation || r.Kind == receipts.KindRedaction || !r.ActionClass.Valid || r.ActionClass.String == "" {
		return Violation{}, apperr.Errorf(apperr.EINVALID, "This receipt records no call of an action class (it is a %s receipt); flag the receipt of the call itself.", r.Kind)
	}
	class := r.ActionClass.String
	row, err := q.InsertViolation(ctx, db.InsertViolationParams{WorkspaceID: p.WorkspaceID, ActionClass: class, ReceiptID: nullID(receiptID),
		Category: category, Reason: reason, FlaggedBy: nullID(p.UserID)})
	if isUniqueViolation(err) {
		return Violation{}, apperr.Errorf(apperr.ECONFLICT, "This receipt is flagged already, and the violation is open.")
	}
	if err != nil {
		return Violation{}, fmt.Errorf("trust: flag violation: %w", err)
	}
	proposal := ""
	if r.ProposalID.Valid {
		proposal = r.ProposalID.UUID.String()
	}
	rid, err := receipts.Record(ctx, q, p.WorkspaceID, receipts.Content{Kind: receipts.KindViolation, Outcome: "flagged", ProposalID: proposal,
		Actor: receipts.ActorOf(p, string(p.Role)), ActionClass: class, Reason: reason, Change: map[string]any{
			"action": "flagged", "category": category, "reason": reason, "receipt_id": receiptID.String(), "violation_id": row.ID.String(),
		}}, s.now())
	if err != nil {
		return Violation{}, err
	}
	if err := Record(ctx, q, Evidence{WorkspaceID: p.WorkspaceID, ActionClass: class, Label: LabelViolation, Provenance: ProvenancePrincipal,
		ReceiptID: rid, ProposalID: r.ProposalID.UUID, RecordedBy: p.UserID, Note: reason}); err != nil {
		return Violation{}, err
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "trust.violation_flagged", "trust_violation", row.ID.String(), map[string]any{
		"action_class": class, "category": category, "reason": reason, "receipt_id": receiptID.String(), "violation_receipt_id": rid.String(),
	}); err != nil {
		return Violation{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Violation{}, fmt.Errorf("trust: commit: %w", err)
	}
	v := violationFromRow(row)
	v.FlaggedByEmail = p.Email
	return v, nil
}

// ClearViolation clears an open violation with a note, so its class is no
// longer suspended (its −1 evidence stays). Only the principal clears:
// an admin of the workspace, or the person who flagged it (see
// Violation.MayClear). Receipted and audited.
func (s *Service) ClearViolation(ctx context.Context, p auth.Principal, id uuid.UUID, note string) (Violation, error) {
	if fe := checkText("note", note); fe != nil {
		return Violation{}, apperr.Invalid("Say why the violation is cleared; nothing was changed.", *fe)
	}
	note = strings.TrimSpace(note)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Violation{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetViolationForUpdate(ctx, db.GetViolationForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Violation{}, ErrViolationNotFound
	}
	if err != nil {
		return Violation{}, fmt.Errorf("trust: read violation: %w", err)
	}
	v := violationFromRow(cur)
	if !v.MayClear(p) {
		return Violation{}, apperr.Errorf(apperr.EFORBIDDEN, "Only an admin of the workspace or the person who flagged it clears a violation.")
	}
	if !v.Open() {
		return Violation{}, apperr.Errorf(apperr.ECONFLICT, "This violation was cleared already.")
	}
	row, err := q.ClearViolation(ctx, db.ClearViolationParams{ID: id, WorkspaceID: p.WorkspaceID, ClearedBy: nullID(p.UserID), ClearNote: pgtype.Text{String: note, Valid: true}})
	if err != nil {
		return Violation{}, fmt.Errorf("trust: clear violation: %w", err)
	}
	if _, err := receipts.Record(ctx, q, p.WorkspaceID, receipts.Content{Kind: receipts.KindViolation, Outcome: "cleared", Actor: receipts.ActorOf(p, string(p.Role)),
		ActionClass: row.ActionClass, Reason: note, Change: map[string]any{
			"action": "cleared", "note": note, "receipt_id": optionalID(row.ReceiptID.UUID), "violation_id": row.ID.String(),
		}}, s.now()); err != nil {
		return Violation{}, err
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "trust.violation_cleared", "trust_violation", row.ID.String(), map[string]any{
		"action_class": row.ActionClass, "note": note,
	}); err != nil {
		return Violation{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Violation{}, fmt.Errorf("trust: commit: %w", err)
	}
	out := violationFromRow(row)
	out.ClearedByEmail = p.Email
	return out, nil
}

// ErrViolationNotFound is a violation that is not in the caller's workspace.
var ErrViolationNotFound = apperr.Errorf(apperr.ENOTFOUND, "No violation of this workspace has that id.")

// Violations lists the workspace's violations, newest first (at most 200),
// only the open ones when openOnly.
func (s *Service) Violations(ctx context.Context, p auth.Principal, openOnly bool) ([]Violation, error) {
	return s.violations(ctx, s.q, p, openOnly)
}

func (s *Service) violations(ctx context.Context, q *db.Queries, p auth.Principal, openOnly bool) ([]Violation, error) {
	rows, err := q.ListViolations(ctx, db.ListViolationsParams{WorkspaceID: p.WorkspaceID, OpenOnly: openOnly, MaxRows: maxViolations})
	if err != nil {
		return nil, fmt.Errorf("trust: list violations: %w", err)
	}
	out := make([]Violation, len(rows))
	for i, r := range rows {
		out[i] = violationFromRow(db.TrustViolation{ID: r.ID, WorkspaceID: r.WorkspaceID, ActionClass: r.ActionClass, ReceiptID: r.ReceiptID, Category: r.Category,
			Reason: r.Reason, FlaggedBy: r.FlaggedBy, CreatedAt: r.CreatedAt, ClearedAt: r.ClearedAt, ClearedBy: r.ClearedBy, ClearNote: r.ClearNote})
		out[i].FlaggedByEmail, out[i].ClearedByEmail = r.FlaggedByEmail, r.ClearedByEmail
	}
	return out, nil
}

// Posterior is the posterior of one class in the caller's workspace: a
// class the registry knows, or one with evidence or a violation (as
// Posteriors lists them); any other is not found. It recommends; it never
// unlocks.
func (s *Service) Posterior(ctx context.Context, p auth.Principal, class string) (Posterior, error) {
	c, known := s.class(class)
	if !known {
		var err error
		if c, err = policy.CanonicalClass(class); err != nil {
			return Posterior{}, errUnknownClass(class)
		}
	}
	post, seen, err := s.posterior(ctx, s.q, p.WorkspaceID, c)
	if err != nil {
		return Posterior{}, err
	}
	if !known && !seen {
		return Posterior{}, errUnknownClass(class)
	}
	return post, nil
}

// posterior reads one class's posterior, and whether the class has any
// evidence or an open violation.
func (s *Service) posterior(ctx context.Context, q *db.Queries, ws uuid.UUID, class string) (Posterior, bool, error) {
	totals, _, err := evidenceTotals(ctx, q, ws)
	if err != nil {
		return Posterior{}, false, err
	}
	t := totals[class]
	open, err := HasOpenViolation(ctx, q, ws, class)
	if err != nil {
		return Posterior{}, false, err
	}
	var override *Threshold
	th, err := q.GetTrustThreshold(ctx, db.GetTrustThresholdParams{WorkspaceID: ws, ActionClass: class})
	switch {
	case err == nil:
		override = &Threshold{CILow: th.CiLow, MinSamples: int(th.MinSamples)}
	case !errors.Is(err, pgx.ErrNoRows):
		return Posterior{}, false, fmt.Errorf("trust: read threshold %s: %w", class, err)
	}
	post := ComputePosterior(class, t.tally(), ThresholdFor(class, override), open)
	return post, t.Rows > 0 || open, nil
}

// Posteriors is the posterior of every class: each the registry knows and
// each with evidence, sorted by name.
func (s *Service) Posteriors(ctx context.Context, p auth.Principal) ([]Posterior, error) {
	st, err := s.state(ctx, s.q, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]Posterior, 0, len(st.classes))
	for _, c := range st.classes {
		out = append(out, st.posterior(c))
	}
	return out, nil
}

// workspaceState is what every class's posterior is computed from.
type workspaceState struct {
	classes    []string
	totals     map[string]classTotals
	open       map[string]bool
	thresholds map[string]Threshold
	// updating: the evidence roll-up is behind (evidenceTotals).
	updating bool
}

func (st workspaceState) posterior(class string) Posterior {
	var override *Threshold
	if th, ok := st.thresholds[class]; ok {
		override = &th
	}
	return ComputePosterior(class, st.totals[class].tally(), ThresholdFor(class, override), st.open[class])
}

// evidenced are the classes with evidence, sorted.
func (st workspaceState) evidenced() []string {
	var out []string
	for _, c := range st.classes {
		if st.totals[c].Rows > 0 {
			out = append(out, c)
		}
	}
	return out
}

func (s *Service) state(ctx context.Context, q *db.Queries, ws uuid.UUID) (workspaceState, error) {
	st := workspaceState{open: map[string]bool{}, thresholds: map[string]Threshold{}}
	all := map[string]bool{}
	for _, c := range s.classes.Classes() {
		all[c] = true
	}
	var err error
	if st.totals, st.updating, err = evidenceTotals(ctx, q, ws); err != nil {
		return st, err
	}
	for c := range st.totals {
		all[c] = true
	}
	open, err := q.OpenViolationClasses(ctx, ws)
	if err != nil {
		return st, fmt.Errorf("trust: open violations: %w", err)
	}
	for _, c := range open {
		st.open[c], all[c] = true, true
	}
	ths, err := q.ListTrustThresholds(ctx, ws)
	if err != nil {
		return st, fmt.Errorf("trust: thresholds: %w", err)
	}
	for _, th := range ths {
		st.thresholds[th.ActionClass] = Threshold{CILow: th.CiLow, MinSamples: int(th.MinSamples)}
	}
	st.classes = slices.Sorted(maps.Keys(all))
	return st, nil
}

// SetThreshold sets the workspace's graduation threshold for a class
// (admins, in person or with their user token), and returns the class's
// posterior under it. It changes a recommendation, never a decision.
// Audited with the old and new value, and receipted as a setting change.
func (s *Service) SetThreshold(ctx context.Context, p auth.Principal, class string, th Threshold, reason string) (Posterior, error) {
	if !isPerson(p) || !p.IsAdmin() {
		return Posterior{}, apperr.Errorf(apperr.EFORBIDDEN, "Only admins set graduation thresholds.")
	}
	c, ok := s.class(class)
	if !ok {
		return Posterior{}, errUnknownClass(class)
	}
	var errs []apperr.FieldError
	if !(th.CILow > 0 && th.CILow < 1) {
		errs = append(errs, apperr.FieldError{Field: "ci_low", Message: "must be greater than 0 and less than 1"})
	}
	if th.MinSamples < 1 || th.MinSamples > 100000 {
		errs = append(errs, apperr.FieldError{Field: "min_samples", Message: "must be a whole number from 1 to 100000"})
	}
	// Overriding a class's threshold says why (the four authority
	// classes: every class change carries its rationale), kept with the
	// change in its audit row and receipt.
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n < 10 || n > 500 {
		errs = append(errs, apperr.FieldError{Field: "reason", Message: "say why, in 10 to 500 characters"})
	}
	if len(errs) > 0 {
		return Posterior{}, apperr.Invalid("The threshold is not valid; nothing was changed.", errs...)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Posterior{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := q.LockTrustThresholds(ctx, p.WorkspaceID); err != nil {
		return Posterior{}, fmt.Errorf("trust: lock thresholds: %w", err)
	}
	old := ThresholdFor(c, nil)
	source := "default"
	cur, err := q.GetTrustThresholdForUpdate(ctx, db.GetTrustThresholdForUpdateParams{WorkspaceID: p.WorkspaceID, ActionClass: c})
	switch {
	case err == nil:
		old, source = Threshold{CILow: cur.CiLow, MinSamples: int(cur.MinSamples)}, "workspace"
	case !errors.Is(err, pgx.ErrNoRows):
		return Posterior{}, fmt.Errorf("trust: read threshold: %w", err)
	}
	if _, err := q.UpsertTrustThreshold(ctx, db.UpsertTrustThresholdParams{WorkspaceID: p.WorkspaceID, ActionClass: c, CiLow: th.CILow,
		MinSamples: int32(th.MinSamples)}); err != nil {
		return Posterior{}, fmt.Errorf("trust: set threshold: %w", err)
	}
	change := map[string]any{"setting": "trust_threshold", "action_class": c, "old_source": source,
		"old": map[string]any{"ci_low": old.CILow, "min_samples": old.MinSamples}, "new": map[string]any{"ci_low": th.CILow, "min_samples": th.MinSamples},
		"reason": reason}
	if _, err := receipts.Record(ctx, q, p.WorkspaceID, receipts.Content{Kind: receipts.KindSettingChange, Outcome: "changed", Actor: receipts.ActorOf(p, string(p.Role)),
		ActionClass: c, Change: change}, s.now()); err != nil {
		return Posterior{}, err
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "trust.threshold_changed", "action_class", c, change); err != nil {
		return Posterior{}, err
	}
	post, _, err := s.posterior(ctx, q, p.WorkspaceID, c)
	if err != nil {
		return Posterior{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Posterior{}, fmt.Errorf("trust: commit: %w", err)
	}
	return post, nil
}

// ClassOverview is one class on the /trust page.
type ClassOverview struct {
	Posterior Posterior
	// ThresholdSource says whose threshold is in force: "workspace",
	// "class" (the class's default) or "default".
	ThresholdSource string
	// Evidence is the latest LatestPerClass rows, newest first.
	Evidence []EvidenceRecord
	// Approvals of Judgments: people's approved and minor_edit judgments
	// over all their approved, minor_edit, edited, heavy_rewrite and
	// rejected ones (the approval rate; fatigue shows as one near 1 with
	// short decision times).
	Approvals, Judgments int64
	// Decisions is how many calls a person decided in the DecisionWindow,
	// MedianDecision the median time they waited for it.
	Decisions      int64
	MedianDecision time.Duration
}

// Overview is the /trust page's content.
type Overview struct {
	// Classes have evidence, an open violation or a workspace threshold.
	Classes []ClassOverview
	// Quiet are the known classes with none of that.
	Quiet []string
	// OpenViolations, newest first.
	OpenViolations []Violation
	// KnownClasses are every class a threshold may be set for.
	KnownClasses []string
	// CanSetThresholds: the caller is an admin in person.
	CanSetThresholds bool
	// Updating: the roll-up is behind by more than a page reads, so the
	// numbers miss some of the latest evidence or calls for a moment.
	Updating bool
}

// Overview reads the /trust page for p (any user of the workspace), in
// one snapshot: the roll-up's aggregates and the rows it has not folded
// yet, so the page reads a bounded number of rows however long the
// workspace's history.
func (s *Service) Overview(ctx context.Context, p auth.Principal) (Overview, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Overview{}, fmt.Errorf("trust: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := q.SetPagePlanning(ctx); err != nil {
		return Overview{}, fmt.Errorf("trust: %w", err)
	}
	st, err := s.state(ctx, q, p.WorkspaceID)
	if err != nil {
		return Overview{}, err
	}
	latest, err := q.LatestEvidence(ctx, db.LatestEvidenceParams{WorkspaceID: p.WorkspaceID, Classes: st.evidenced(), PerClass: LatestPerClass})
	if err != nil {
		return Overview{}, fmt.Errorf("trust: latest evidence: %w", err)
	}
	rows := map[string][]EvidenceRecord{}
	for _, r := range latest {
		rows[r.ActionClass] = append(rows[r.ActionClass], EvidenceRecord{ID: r.ID, ActionClass: r.ActionClass, Label: Label(r.Label), Provenance: Provenance(r.Provenance),
			Weight: r.Weight, ReceiptID: r.ReceiptID.UUID, ProposalID: r.ProposalID.UUID, Note: r.Note.String, CreatedAt: r.CreatedAt,
			ConversationID: r.ConversationID.UUID, NotebookID: r.NotebookID.UUID})
	}
	now := s.now()
	decided, behind, err := intent.ReadDecisions(ctx, q, p.WorkspaceID, now.Add(-DecisionWindow), now.AddDate(0, 0, 1))
	if err != nil {
		return Overview{}, fmt.Errorf("trust: decision times: %w", err)
	}
	open, err := s.violations(ctx, q, p, true)
	if err != nil {
		return Overview{}, err
	}
	out := Overview{OpenViolations: open, KnownClasses: s.classes.Classes(), CanSetThresholds: isPerson(p) && p.IsAdmin(), Updating: st.updating || behind}
	for _, c := range st.classes {
		_, override := st.thresholds[c]
		if st.totals[c].Rows == 0 && !st.open[c] && !override {
			out.Quiet = append(out.Quiet, c)
			continue
		}
		t := st.totals[c]
		co := ClassOverview{Posterior: st.posterior(c), Evidence: rows[c], Approvals: t.JudgedApprovals, Judgments: t.Judgments,
			Decisions: decided[c].Count, MedianDecision: time.Duration(intent.MedianSeconds(decided[c].Hist) * float64(time.Second))}
		switch _, classDefault := classThresholds()[c]; {
		case override:
			co.ThresholdSource = "workspace"
		case classDefault:
			co.ThresholdSource = "class"
		default:
			co.ThresholdSource = "default"
		}
		out.Classes = append(out.Classes, co)
	}
	return out, nil
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// Hint says a class's calls have earned more trust: a graduation hint in a
// conversation's or notebook's header. It recommends; raising the setting
// is a person's action.
type Hint struct {
	Posterior
	Approvals, Edits, Rejections int
}

// Hints are the graduation hints for the classes a scope's calls use:
// each class that is ready, with how people judged its calls.
func (s *Service) Hints(ctx context.Context, p auth.Principal, classes []string) ([]Hint, error) {
	if len(classes) == 0 {
		return nil, nil
	}
	st, err := s.state(ctx, s.q, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	byClass := map[string]*Hint{}
	for _, c := range classes {
		post := st.posterior(c)
		if !post.GraduationReady || post.Tier != TierReady {
			continue
		}
		t := st.totals[c]
		byClass[c] = &Hint{Posterior: post, Approvals: int(t.Approvals), Edits: int(t.Edits), Rejections: int(t.Rejections)}
	}
	var out []Hint
	for _, c := range classes {
		if h := byClass[c]; h != nil {
			out = append(out, *h)
		}
	}
	return out, nil
}
