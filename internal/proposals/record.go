package proposals

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/trust"
)

// Every outcome of a call leaves a receipt in the outcome's own
// transaction (internal/receipts chains it later), and every person's
// judgment on a call leaves evidence for its action class
// (internal/trust). The automatic path judges nothing, so it leaves no
// evidence.

// Receipt outcomes, within their kind.
const (
	outcomeRejected    = "rejected"
	outcomeBlocked     = "blocked"
	outcomeConstraint  = "constraint"
	outcomeHumanOnly   = "human_only"
	outcomeEdited      = "edited"
	outcomeReconciled  = "reconciled"
	outcomeSettled     = "settled"
	outcomeAboveCeilng = "above_ceiling"
)

// receiptPath names an apply path in receipts: the owner's confirm is
// "owner".
func receiptPath(path string) string {
	if path == PathHuman {
		return "owner"
	}
	return path
}

// receiptFor is a receipt's content for an outcome on the proposal row.
func (s *Service) receiptFor(p auth.Principal, kind, outcome string, row db.Proposal, reason string) receipts.Content {
	c := receipts.Content{Kind: kind, Outcome: outcome, ProposalID: row.ID.String(), Actor: receipts.ActorOf(p, string(p.Role)),
		ActionClass: classOf(row), Tool: row.Tool, DecisionAtPropose: row.Decision, DecisionAtEffect: row.EffectDecision,
		Arguments: row.Arguments, ToolsHash: s.tools.Hash(), Rationale: row.Rationale, Reason: reason}
	if len(row.AppliedArguments) > 0 {
		c.ArgumentsBefore, c.Arguments = row.Arguments, row.AppliedArguments
	}
	return c
}

// record writes the receipt of an outcome on the proposal row, in q's
// transaction.
func (s *Service) record(ctx context.Context, q *db.Queries, p auth.Principal, kind, outcome string, row db.Proposal, reason string) (uuid.UUID, error) {
	return receipts.Record(ctx, q, row.WorkspaceID, s.receiptFor(p, kind, outcome, row, reason), time.Now())
}

// judge records a person's judgment on the call as evidence for its
// class, tied to the receipt of the outcome.
func (s *Service) judge(ctx context.Context, q *db.Queries, p auth.Principal, row db.Proposal, label trust.Label, receiptID uuid.UUID) error {
	class := classOf(row)
	if class == "" {
		return nil // an unclassified call was blocked; there is nothing to learn for a class
	}
	return trust.Record(ctx, q, trust.Evidence{WorkspaceID: row.WorkspaceID, ActionClass: class, Label: label,
		Provenance: trust.ProvenanceReceipt, ReceiptID: receiptID, ProposalID: row.ID, RecordedBy: p.UserID})
}

// executed records a finished call: its receipt and, when a person ran it
// (the owner, approvers, the principal), their judgment: approved when it
// ran as proposed, a minor edit, an edit or a heavy rewrite by how much of
// the arguments they changed. refused marks a call an approval let through
// that then broke a constraint: a refusal, not an execution.
func (s *Service) executed(ctx context.Context, q *db.Queries, p auth.Principal, row db.Proposal, path, failure string, refused bool) error {
	kind, outcome := receipts.KindExecution, receiptPath(path)
	if refused {
		kind, outcome = receipts.KindRefusal, outcomeConstraint
	}
	id, err := s.record(ctx, q, p, kind, outcome, row, failure)
	if err != nil {
		return err
	}
	if path == PathAuto || path == PathGrant {
		return nil // nobody judged it: no evidence
	}
	label := trust.LabelApproved
	if len(row.AppliedArguments) > 0 {
		label, _ = trust.EditLabel(row.Arguments, row.AppliedArguments)
	}
	return s.judge(ctx, q, p, row, label, id)
}

// rejected records a person's rejection: a discarded notebook cell is
// dropped, anything else rejected.
func (s *Service) rejected(ctx context.Context, q *db.Queries, p auth.Principal, row db.Proposal, reason string) error {
	id, err := s.record(ctx, q, p, receipts.KindRefusal, outcomeRejected, row, reason)
	if err != nil {
		return err
	}
	label := trust.LabelRejected
	if row.NotebookID.Valid {
		label = trust.LabelDropped
	}
	return s.judge(ctx, q, p, row, label, id)
}

// refusedCall records a call refused before it was recorded as a proposal
// (blocked, a broken constraint): there is no proposal row, so the receipt
// carries the call itself.
func (s *Service) refusedCall(ctx context.Context, q *db.Queries, p auth.Principal, outcome, tool string, args json.RawMessage, rationale string, d decision, reason string) error {
	dj, err := json.Marshal(d.Decision)
	if err != nil {
		return fmt.Errorf("proposals: encode decision: %w", err)
	}
	_, err = receipts.Record(ctx, q, p.WorkspaceID, receipts.Content{Kind: receipts.KindRefusal, Outcome: outcome,
		Actor: receipts.ActorOf(p, string(p.Role)), ActionClass: d.class, Tool: tool, DecisionAtPropose: dj, DecisionAtEffect: dj,
		Arguments: args, ToolsHash: s.tools.Hash(), Rationale: rationale, Reason: reason}, time.Now())
	return err
}

// refusalOutcome names a refusal by the decision that refused it.
func refusalOutcome(state policy.State) string {
	switch state {
	case policy.StateBlocked:
		return outcomeBlocked
	case policy.StateHumanOnly:
		return outcomeHumanOnly
	}
	return outcomeAboveCeilng
}

// classOf is the class the call was last decided as: at the moment of
// effect if it got there (an edit can change it), else at propose time.
func classOf(row db.Proposal) string {
	if bytes.Equal(row.EffectDecision, row.Decision) {
		// Decided once (the automatic path): the class it was proposed as.
		return row.ActionClass.String
	}
	if d := decodeDecision(row.EffectDecision); d != nil && d.ActionClass != "" {
		return d.ActionClass
	}
	return row.ActionClass.String
}
