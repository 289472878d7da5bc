// Package trust turns human judgments on agents' calls into evidence, and
// evidence into a posterior per action class that says when a class has
// earned more trust (the Trust Graduation Protocol). It recommends; it never
// unlocks anything by itself.
package trust

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
)

// Label is what a person's judgment on a call was.
type Label string

// Labels and their decision weights.
const (
	LabelSent         Label = "sent"
	LabelApproved     Label = "approved"
	LabelMinorEdit    Label = "minor_edit"
	LabelEdited       Label = "edited"
	LabelHeavyRewrite Label = "heavy_rewrite"
	LabelHeld         Label = "held"
	LabelRejected     Label = "rejected"
	LabelDropped      Label = "dropped"
	LabelViolation    Label = "violation"
)

// DecisionWeights weigh each label.
var DecisionWeights = map[Label]float64{
	LabelSent: 1.00, LabelApproved: 0.85, LabelMinorEdit: 0.35, LabelEdited: -0.15, LabelHeavyRewrite: -0.55,
	LabelHeld: 0, LabelRejected: -1, LabelDropped: -1, LabelViolation: -1,
}

// Provenance is where evidence came from.
type Provenance string

// Provenances and their weights: model-inferred evidence is never
// upgraded.
const (
	ProvenanceReceipt       Provenance = "receipt"
	ProvenancePrincipal     Provenance = "principal"
	ProvenanceConnector     Provenance = "connector"
	ProvenanceModelInferred Provenance = "model_inferred"
)

// ProvenanceWeights weigh each provenance.
var ProvenanceWeights = map[Provenance]float64{
	ProvenanceReceipt: 1, ProvenancePrincipal: 1, ProvenanceConnector: 0.3, ProvenanceModelInferred: 0.1,
}

// Evidence is one judgment on a call of an action class.
type Evidence struct {
	WorkspaceID uuid.UUID
	ActionClass string
	Label       Label
	Provenance  Provenance
	ReceiptID   uuid.UUID
	ProposalID  uuid.UUID
	RecordedBy  uuid.UUID
	Note        string
}

// Weight is decision weight × provenance weight; an unknown label or
// provenance is an error.
func (e Evidence) Weight() (decision, provenance, weight float64, err error) {
	d, ok := DecisionWeights[e.Label]
	if !ok {
		return 0, 0, 0, fmt.Errorf("trust: unknown label %q", e.Label)
	}
	p, ok := ProvenanceWeights[e.Provenance]
	if !ok {
		return 0, 0, 0, fmt.Errorf("trust: unknown provenance %q", e.Provenance)
	}
	return d, p, d * p, nil
}

// Record writes evidence with q, in the caller's transaction (the outcome
// it weighs, and its receipt).
func Record(ctx context.Context, q *db.Queries, e Evidence) error {
	d, p, w, err := e.Weight()
	if err != nil {
		return err
	}
	nullID := func(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }
	if err := q.InsertEvidence(ctx, db.InsertEvidenceParams{WorkspaceID: e.WorkspaceID, ActionClass: e.ActionClass, Label: string(e.Label),
		Provenance: string(e.Provenance), DecisionWeight: d, ProvenanceWeight: p, Weight: w, ReceiptID: nullID(e.ReceiptID),
		ProposalID: nullID(e.ProposalID), RecordedBy: nullID(e.RecordedBy), Note: pgtype.Text{String: e.Note, Valid: e.Note != ""}}); err != nil {
		return fmt.Errorf("trust: record evidence: %w", err)
	}
	return nil
}

// HasOpenViolation reports whether the class has a violation the
// principal has not cleared; the decision's class layer reads it.
func HasOpenViolation(ctx context.Context, q *db.Queries, ws uuid.UUID, class string) (bool, error) {
	open, err := q.HasOpenViolation(ctx, db.HasOpenViolationParams{WorkspaceID: ws, ActionClass: class})
	if err != nil {
		return false, fmt.Errorf("trust: read violations: %w", err)
	}
	return open, nil
}
