package proposals

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// decision is the layered decision on one call, with what it was taken on.
type decision struct {
	policy.Decision
	scope       scopeDecision
	class       string
	ws          tools.Workspace
	constraints []policy.Constraint
	// rationaleMin is the workspace's shortest acceptable rationale.
	rationaleMin int
	// rationaleWarnUntil is set while the workspace accepts a missing or
	// short rationale with a warning (rationale mode warn).
	rationaleWarnUntil *time.Time
	// call is what the layers read: kept on the proposal so a past call can
	// be decided again under another setting (the shadow preview).
	call policy.Call
	// shadow is what the tool's shadow rule would have decided, when it
	// differs (nil: it has none, or the same decision; shadow.go).
	shadow *ShadowVerdict
}

// auto reports whether the call is applied at once, without a person.
func (d decision) auto() bool {
	return d.State == policy.StateAllowed || d.State == policy.StateAllowedWithConstraints
}

// scopeDecision is what the scope's row says.
type scopeDecision struct {
	mode        policy.PermissionMode // conversations
	trust       policy.TrustLevel     // notebooks
	disposition string
	// environment is where the scope's calls take effect, as its owner
	// said ("": not said); staging_only holds only in staging.
	environment string
}

// decide reads the scope's row (owner-scoped: someone else's scope is not
// found) and the workspace's settings, classifies the call, and runs every
// layer (internal/policy). It reads rows as they are now, never cached.
func (s *Service) decide(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope, tool *tools.Tool, args json.RawMessage) (decision, error) {
	rc, err := s.readForDecision(ctx, q, p, scope, tool)
	if err != nil {
		return decision{}, err
	}
	d, err := s.decideOn(rc, p, scope, tool, args)
	if err != nil {
		return decision{}, err
	}
	return s.namedGrantor(ctx, q, p, scope, tool, args, rc, d)
}

// beginDeciding starts a call's transaction and reads what its decision
// needs in the same round trip (see beginning). The transaction is
// returned even with an error, when it began: the caller rolls it back.
//
// An outside tool's read reads them on its own instead, and its
// transaction begins only if something is written in it (a refusal, a
// grant's use, a call left for a person): when the call runs at once
// nothing is (readOutside), and its transaction would be a BEGIN and a
// COMMIT around one statement, a round trip more for nothing. Under READ
// COMMITTED every statement reads rows as they are when it starts and the
// decision's read locks nothing, so the statements after it read and
// write as they would in one transaction with it.
func (s *Service) beginDeciding(ctx context.Context, p auth.Principal, scope Scope, tool *tools.Tool) (*callTx, decisionRows, error) {
	if tool.Outside() && tool.Contract.Authority == policy.AuthorityRead {
		rc, err := s.readForDecision(ctx, s.q, p, scope, tool)
		return s.lazyCall(), rc, err
	}
	tx, b, err := s.beginCall(ctx)
	if err != nil {
		return nil, decisionRows{}, fmt.Errorf("proposals: begin: %w", err)
	}
	rc, err := s.readForDecision(ctx, db.New(b), p, scope, tool)
	return tx, rc, err
}

// decideOn classifies the call and runs every layer on the rows read.
func (s *Service) decideOn(rc decisionRows, p auth.Principal, scope Scope, tool *tools.Tool, args json.RawMessage) (decision, error) {
	ws := rc.ws
	var argMap map[string]any
	if err := json.Unmarshal(args, &argMap); err != nil {
		return decision{}, fmt.Errorf("proposals: decode arguments: %w", err)
	}
	constraints := tool.ConstraintsFor(ws)
	names := make([]string, len(constraints))
	for i, c := range constraints {
		names[i] = c.Kind
	}
	class := tool.Class(argMap, ws, s.tools.Classes())
	call := policy.Call{
		Scope: policy.ScopeKind(scope.Kind), Effect: tool.Effect, Mode: rc.scope.mode, Trust: rc.scope.trust,
		Risk: tool.Contract.Risk, ActionClass: class,
		HumanGated: tool.Contract.Gating.Required, ThresholdExceeded: tool.ThresholdExceeded(argMap),
		ApproverRole:        tool.Contract.Gating.ApproverRole,
		AutoApproveHighRisk: ws.AutoApproveHighRisk,
		// ADR-036's confirm: true on a high-risk call, where the workspace
		// opted in (the risk gate only; never at effect after a person).
		ConfirmedHighRisk: rc.confirm && ws.ConfirmRunsHighRisk && tool.Contract.Risk == policy.RiskHigh,
		Constraints:       names,
		// An open trust violation on the class holds it for review until
		// the principal clears it.
		OpenViolation: slices.Contains(rc.openViolations, class),
		// The caller's token may narrow what it calls (the token layer).
		Tool: tool.Name, TokenScope: p.TokenScope,
	}
	if len(rc.grants) > 0 {
		// The grant layer (grants.go): only in a scope with live grants.
		call.Grants, call.Authority, call.GrantFacts = rc.grants, tool.Contract.Authority, s.grantFacts(tool, argMap, ws)
	}
	dec := policy.Decide(call, s.tools.Classes())
	if dec.Grant != nil {
		constraints = append(constraints, grantBounds(rc.grants, dec.Grant.ID)...)
	}
	dec.Bounds = constraints // their values, for the protocol's shape (policy.TGPOf)
	return decision{Decision: dec, scope: rc.scope, class: class, ws: ws, constraints: constraints,
		rationaleMin: rc.rationaleMin, rationaleWarnUntil: rc.rationaleWarnUntil, call: call,
		shadow: s.shadowVerdict(rc, p, scope, tool, args, dec.State)}, nil
}

// decisionRows is what the decision reads from the database.
type decisionRows struct {
	// confirm is the call's confirm: true (not read: the caller sets it
	// before deciding a call as proposed).
	confirm      bool
	scope        scopeDecision
	ws           tools.Workspace
	rationaleMin int
	// rationaleWarnUntil is the end of the workspace's warn mode (nil: strict).
	rationaleWarnUntil *time.Time
	openViolations     []string
	// grants are the live grants that may apply (grants.go; nil: none).
	grants []policy.Grant
}

// warnUntil is the end of a workspace's rationale warn mode, nil in strict mode.
func warnUntil(mode string, until *time.Time) *time.Time {
	if mode != "warn" {
		return nil
	}
	return until
}

// readForDecision reads the scope's row (owner-scoped: someone else's
// scope is not found), the workspace's settings and the classes with an
// open trust violation, in one round trip, as they are now: never cached.
func (s *Service) readForDecision(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope, tool *tools.Tool) (decisionRows, error) {
	switch scope.Kind {
	case ScopeConversation:
		r, err := q.ReadConversationForDecision(ctx, db.ReadConversationForDecisionParams{ID: scope.ID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID,
			TokenID: nullUUID(p.TokenID)})
		if errors.Is(err, pgx.ErrNoRows) {
			return decisionRows{}, conversations.ErrNotFound
		}
		if err != nil {
			return decisionRows{}, fmt.Errorf("proposals: read conversation: %w", err)
		}
		mode := policy.PermissionMode(r.PermissionMode)
		return decisionRows{
			scope: scopeDecision{mode: mode, disposition: string(policy.DecideToolDisposition(tool.Effect, mode)), environment: r.Environment.String},
			ws: tools.Workspace{InternalDomains: r.InternalDomains, WebhookAllowlist: r.WebhookAllowlist, AutoApproveHighRisk: r.AutoApproveHighRisk,
				ConfirmRunsHighRisk: r.ConfirmRunsHighRisk},
			rationaleMin: int(r.RationaleMinLength), openViolations: r.OpenViolations, rationaleWarnUntil: warnUntil(r.RationaleMode, r.RationaleWarnUntil),
			grants: s.decodeGrants(r.Grants),
		}, nil
	case ScopeNotebook:
		r, err := q.ReadNotebookForDecision(ctx, db.ReadNotebookForDecisionParams{ID: scope.ID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID,
			TokenID: nullUUID(p.TokenID)})
		if errors.Is(err, pgx.ErrNoRows) {
			return decisionRows{}, notebooks.ErrNotFound
		}
		if err != nil {
			return decisionRows{}, fmt.Errorf("proposals: read notebook: %w", err)
		}
		trust := policy.TrustLevel(r.TrustLevel)
		gate, err := policy.GateAction(policy.TierOf(tool.Effect), trust)
		if err != nil {
			// gate is already the strictest outcome; say why it was taken.
			s.log.Warn("notebook gate failed closed", "tool", tool.Name, "notebook_id", scope.ID, "err", err)
		}
		return decisionRows{
			scope: scopeDecision{trust: trust, disposition: string(gate), environment: r.Environment.String},
			ws: tools.Workspace{InternalDomains: r.InternalDomains, WebhookAllowlist: r.WebhookAllowlist, AutoApproveHighRisk: r.AutoApproveHighRisk,
				ConfirmRunsHighRisk: r.ConfirmRunsHighRisk},
			rationaleMin: int(r.RationaleMinLength), openViolations: r.OpenViolations, rationaleWarnUntil: warnUntil(r.RationaleMode, r.RationaleWarnUntil),
			grants: s.decodeGrants(r.Grants),
		}, nil
	}
	return decisionRows{}, fmt.Errorf("proposals: unknown scope %q", scope.Kind)
}

// ownsScope checks that the scope is the caller's (someone else's is not
// found).
func (s *Service) ownsScope(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope) error {
	var err error
	switch scope.Kind {
	case ScopeConversation:
		_, err = q.GetConversation(ctx, db.GetConversationParams{ID: scope.ID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
		if errors.Is(err, pgx.ErrNoRows) {
			return conversations.ErrNotFound
		}
	case ScopeNotebook:
		_, err = q.GetNotebook(ctx, db.GetNotebookParams{ID: scope.ID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
		if errors.Is(err, pgx.ErrNoRows) {
			return notebooks.ErrNotFound
		}
	default:
		return fmt.Errorf("proposals: unknown scope %q", scope.Kind)
	}
	if err != nil {
		return fmt.Errorf("proposals: read scope: %w", err)
	}
	return nil
}

// refusal is the 403 for a call nobody may run here (human_only, blocked),
// carrying the decision, and for a human-only call the prepared action
// that waits for the principal.
func refusal(d decision, prepared uuid.UUID) error {
	msg := "This call is blocked."
	if d.State == policy.StateHumanOnly {
		msg = "Only a person can perform this action; the agent cannot run it."
	}
	for _, l := range d.Layers {
		if l.State == d.State {
			msg += " " + l.Reason
			break
		}
	}
	extra := map[string]any{"decision": d.Decision}
	if prepared != uuid.Nil {
		extra["proposal_id"] = prepared.String()
		msg += " The prepared action waits for the principal, who can record that they performed it."
	}
	return &apperr.Error{Code: apperr.EFORBIDDEN, Message: msg, Extra: extra}
}

// DryRun is the canExecute question: how would this call be decided now?
// It writes nothing but an audit row.
func (s *Service) DryRun(ctx context.Context, p auth.Principal, scope Scope, toolName string, arguments json.RawMessage) (policy.Decision, error) {
	tool, ok := s.tools.Get(toolName)
	if !ok {
		return policy.Decision{}, unknownTool(toolName)
	}
	args, err := compact(arguments)
	if err == nil {
		err = tool.ValidateArguments(args)
	}
	if err != nil {
		return policy.Decision{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return policy.Decision{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	d, err := s.decide(ctx, q, p, scope, tool, args)
	if err != nil {
		return policy.Decision{}, err
	}
	if err := s.audit(ctx, q, p, tool, "decision.checked", "tool", tool.Name, map[string]any{
		"scope": scope.Kind, "scope_id": scope.ID, "state": d.State, "action_class": d.class,
	}); err != nil {
		return policy.Decision{}, err
	}
	return d.Decision, tx.Commit(ctx)
}

// checkConstraints checks the call against every constraint on it: the
// declared ones, the workspace's, and those stored on the proposal (an
// approver's). A broken one is refused with its name.
func (s *Service) checkConstraints(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, args json.RawMessage, d decision, stored []policy.Constraint, approvers []string) error {
	cs := append(slices.Clone(d.constraints), stored...)
	if approvers == nil {
		// Not the approval path: a witness is the approvals queue's to
		// find, so requires_witness waits for it (the call is deferred).
		cs = slices.DeleteFunc(cs, func(c policy.Constraint) bool { return c.Kind == policy.ConstraintRequiresWitness })
	}
	if len(cs) == 0 {
		return nil
	}
	facts := policy.Facts{Now: time.Now(), Environment: cmp.Or(d.scope.environment, s.env), InternalDomains: d.ws.InternalDomains, Approvers: approvers}
	if tool.Contract.Facts != nil {
		var m map[string]any
		if err := json.Unmarshal(args, &m); err != nil {
			return fmt.Errorf("proposals: decode arguments: %w", err)
		}
		f := tool.Contract.Facts(m)
		facts.Recipients, facts.URLs, facts.Amount = f.Recipients, f.URLs, f.Amount
	}
	for _, c := range cs {
		if c.Kind != policy.ConstraintRateLimit || c.Window <= 0 {
			continue
		}
		if _, counted := facts.RecentCalls[c.Window]; counted {
			continue
		}
		// The calls of this tool that ran in the constraint's window, in
		// the workspace: each rate_limit is compared with its own window's
		// count (a day's count against a limit per minute refused calls
		// the minute's limit allowed).
		n, err := q.CountRecentCalls(ctx, db.CountRecentCallsParams{WorkspaceID: p.WorkspaceID, Tool: tool.Name, CreatedAt: facts.Now.Add(-c.Window)})
		if err != nil {
			return fmt.Errorf("proposals: count recent calls: %w", err)
		}
		if facts.RecentCalls == nil {
			facts.RecentCalls = map[time.Duration]int{}
		}
		facts.RecentCalls[c.Window] = int(n)
	}
	err := policy.Check(cs, facts)
	var v *policy.Violation
	if errors.As(err, &v) {
		return &apperr.Error{Code: apperr.EFORBIDDEN, Message: "The call breaks a constraint: " + v.Error() + ".",
			Extra: map[string]any{"constraint": v.Constraint}}
	}
	return err
}

// redact removes the fields that redaction_rules name from a result before
// it is stored.
func redact(result []byte, constraints json.RawMessage) []byte {
	var cs []policy.Constraint
	if json.Unmarshal(constraints, &cs) != nil || len(cs) == 0 {
		return result
	}
	var doc map[string]any
	if json.Unmarshal(result, &doc) != nil {
		return result
	}
	b, err := json.Marshal(policy.Redact(doc, cs))
	if err != nil {
		return result
	}
	return b
}
