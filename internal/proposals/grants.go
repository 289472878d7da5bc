package proposals

import (
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
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/grants"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Grants (internal/grants, docs/policy.md "Grants"). The decision reads
// the scope's live grants in the statement that reads its row (NULL when
// there are none), and the grant layer may let a call that waits for a
// person through instead. Such a call is the automatic path's: before it
// runs, one call is taken off its grant in its own transaction (UseGrant,
// a conditional UPDATE), so no grant is used more than it holds, whatever
// the number of callers and instances; a grant found used up, revoked or
// expired by then leaves the call to a person, as before. Its audit rows
// and its receipt say "grant" (PathGrant), and, as on the automatic path,
// nobody's judgment is recorded: a call under a grant is no fresh human
// evidence for its class. A person's own path (the owner's confirm, an
// approval) decides without grants: their approval is the person.

// PathGrant names, in audit rows and receipts, a call a grant let through
// (its proposal's apply_path is auto).
const PathGrant = "grant"

// Grants is the service that creates, lists and revokes grants.
func (s *Service) Grants() *grants.Service { return s.grantsSvc }

// decodeGrants reads the live grants the decision's row carries (none:
// NULL). A row that cannot be read grants nothing: it fails closed.
func (s *Service) decodeGrants(raw []byte) []policy.Grant {
	if len(raw) == 0 {
		return nil
	}
	var gs []policy.Grant
	if err := json.Unmarshal(raw, &gs); err != nil {
		s.log.Error("grants: the decision's grants cannot be read; none applies", "err", err)
		return nil
	}
	return gs
}

// grantFacts is what a grant's bounds are checked against: the call's
// recipients, URLs and amount, the workspace's domains.
func (s *Service) grantFacts(tool *tools.Tool, args map[string]any, ws tools.Workspace) policy.Facts {
	f := policy.Facts{Now: time.Now(), Environment: s.env, InternalDomains: ws.InternalDomains}
	if tool.Contract.Facts != nil {
		tf := tool.Contract.Facts(args)
		f.Recipients, f.URLs, f.Amount = tf.Recipients, tf.URLs, tf.Amount
	}
	return f
}

// grantBounds are the bounds of the grant that allowed a call: they join
// its constraints, checked again at execution.
func grantBounds(gs []policy.Grant, id string) []policy.Constraint {
	for _, g := range gs {
		if g.ID == id {
			return g.Bounds
		}
	}
	return nil
}

// namedGrantor is a decision that a grant covers, with its grantor named
// by email (the decision's read carries only their id): for a decision
// that does not use the grant (DryRun).
func (s *Service) namedGrantor(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope, tool *tools.Tool, args json.RawMessage,
	rows decisionRows, d decision) (decision, error) {
	if d.Grant == nil {
		return d, nil
	}
	i := slices.IndexFunc(rows.grants, func(g policy.Grant) bool { return g.ID == d.Grant.ID })
	by, err := uuid.Parse(rows.grants[i].GrantedBy)
	if err != nil {
		return decision{}, fmt.Errorf("proposals: grantor %q: %w", rows.grants[i].GrantedBy, err)
	}
	u, err := q.GetUser(ctx, by)
	if err != nil {
		return decision{}, fmt.Errorf("proposals: read grantor: %w", err)
	}
	rows.grants = slices.Clone(rows.grants)
	rows.grants[i].GrantedBy = u.Email
	return s.decideOn(rows, p, scope, tool, args)
}

// decideForPerson is the decision on a person's path to effect: the rows
// as they are now, without grants (the person is there).
func (s *Service) decideForPerson(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope, tool *tools.Tool, args json.RawMessage) (decision, error) {
	rc, err := s.readForDecision(ctx, q, p, scope, tool)
	if err != nil {
		return decision{}, err
	}
	rc.grants = nil
	return s.decideOn(rc, p, scope, tool, args)
}

// useGrant takes one call off the grant that allowed d, in the call's
// transaction (q), and returns the decision with what is left after it.
// A grant that is used up, revoked or expired by now, or whose approver
// no longer holds its role, is dropped and the call decided again without
// it (another grant may cover it; otherwise it waits for a person).
func (s *Service) useGrant(ctx context.Context, q *db.Queries, p auth.Principal, scope Scope, c checked, rows decisionRows, d decision) (decision, error) {
	for d.Grant != nil {
		id := d.Grant.ID
		gid, err := uuid.Parse(id)
		if err != nil {
			return decision{}, fmt.Errorf("proposals: grant id %q: %w", id, err)
		}
		data, err := json.Marshal(map[string]any{"tool": c.tool.Name, "action_class": d.class, "scope": scope.Kind, "scope_id": scope.ID})
		if err != nil {
			return decision{}, fmt.Errorf("proposals: encode grant use: %w", err)
		}
		user, token, _ := p.AuditIdentity()
		used, err := q.UseGrant(ctx, db.UseGrantParams{WorkspaceID: p.WorkspaceID, ID: gid, ActorKind: audit.KindOf(p),
			ActorUserID: nullUUID(user), ActorTokenID: nullUUID(token), Data: data, RetentionUntil: time.Now().Add(c.tool.Contract.Retention)})
		if errors.Is(err, pgx.ErrNoRows) {
			rows.grants = slices.DeleteFunc(slices.Clone(rows.grants), func(g policy.Grant) bool { return g.ID == id })
			if d, err = s.decideOn(rows, p, scope, c.tool, c.args); err != nil {
				return decision{}, err
			}
			continue
		}
		if err != nil {
			return decision{}, fmt.Errorf("proposals: use grant %s: %w", id, err)
		}
		// Decided again on the grant as it is after this use, so the
		// layer's reason says what is left, and who granted it.
		i := slices.IndexFunc(rows.grants, func(g policy.Grant) bool { return g.ID == id })
		g := rows.grants[i]
		g.Remaining, g.GrantedBy = int(used.Remaining)+1, used.GrantedByEmail
		one := rows
		one.grants = []policy.Grant{g}
		after, err := s.decideOn(one, p, scope, c.tool, c.args)
		if err != nil {
			return decision{}, err
		}
		if after.Grant == nil || after.Grant.ID != id {
			return decision{}, fmt.Errorf("proposals: grant %s was used but no longer covers the call", id)
		}
		return after, nil
	}
	return d, nil
}

// underGrant reports whether a call's proposal.created data names the
// grant that let it through.
func underGrant(created map[string]any) bool {
	_, ok := created["grant_id"]
	return ok
}

// autoPath is how an automatic call is named in its audit rows and
// receipt: auto, or grant when a grant let it through.
func autoPath(d decision) string {
	if d.Grant != nil {
		return PathGrant
	}
	return PathAuto
}

// ApplyAndGrant is the owner's Approve (or Run) with "allow similar": it
// applies the proposal as Apply does and, in the same transaction, grants
// calls like it (the same tool or class, here or from the same token)
// for what the card would have asked the owner. A choice that is not
// valid, or that the owner may not grant, is refused with the field named
// and nothing is done.
func (s *Service) ApplyAndGrant(ctx context.Context, p auth.Principal, id uuid.UUID, edited json.RawMessage, c grants.Choice) (Proposal, error) {
	if p.IsAgent() {
		return Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot approve proposals; the owner of the conversation or notebook does.")
	}
	if err := c.Validate(); err != nil {
		return Proposal{}, err
	}
	return s.apply(ctx, p, id, edited, policy.PathOwner, &c)
}

// ApproveAndGrant is an approver's approval with "allow similar": it
// approves the packet as Approve does and, in the same transaction as the
// call's claim, grants calls like it for packets of the same role. Never
// where a witness is needed.
func (s *Service) ApproveAndGrant(ctx context.Context, p auth.Principal, id uuid.UUID, constraints []policy.Constraint, c grants.Choice) (Approval, Proposal, error) {
	if err := c.Validate(); err != nil {
		return Approval{}, Proposal{}, err
	}
	return s.approve(ctx, p, id, constraints, &c)
}

// grantWith creates the grant chosen with an approval, in its
// transaction, anchored on the call as it will run.
func (s *Service) grantWith(ctx context.Context, q *db.Queries, p auth.Principal, ec effectCall, ceiling policy.State, approval uuid.NullUUID, role string, witness bool, c grants.Choice) error {
	var args map[string]any
	if err := json.Unmarshal(ec.args, &args); err != nil {
		return fmt.Errorf("proposals: decode arguments: %w", err)
	}
	a := grants.Anchor{ProposalID: ec.cur.ID, ApprovalID: approval, Tool: ec.tool, ActionClass: ec.d.class,
		ConversationID: ec.cur.ConversationID, NotebookID: ec.cur.NotebookID, TokenID: ec.cur.ProposedByTokenID,
		OwnerID: ec.cur.OwnerID, ProposerID: ec.cur.ProposedByUserID, Ceiling: ceiling, Role: role, Witness: witness,
		Facts: s.grantFacts(ec.tool, args, ec.d.ws)}
	_, err := s.grantsSvc.CreateWith(ctx, q, p, a, c)
	return err
}

// grantNeedsApprover refuses an owner's grant on a call that now needs an
// approver: an owner grants only what their confirm card would run.
func grantNeedsApprover(ec effectCall) error {
	return apperr.Invalid(fmt.Sprintf("This call is now %s and waits for an approver: an owner's grant cannot stand in for one. Nothing was done.", ec.d.State),
		apperr.FieldError{Field: "grant", Message: "cannot stand in for an approver"})
}
