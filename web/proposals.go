package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// The owner's actions on a proposal, the same in both scopes: a confirm
// card in a conversation, a cell in a notebook.

// proposalCard handles "GET /proposals/:id/card": the card as it is now
// (a running cell polls it until it finishes).
func (s *Server) proposalCard(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	p, err := s.props.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ProposalCardView(s.toCard(c.Request().Context(), p)))
}

// applyProposal handles "POST /proposals/:id/apply" (Approve / Run, and
// their Edit & … forms).
func (s *Server) applyProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	ctx, pr := c.Request().Context(), principal(c)
	form, err := c.FormParams()
	if err != nil {
		return apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
	}
	if err := s.requireIrreversibleAck(c, id, form.Get("irreversible_ack")); err != nil {
		return s.renderCard(c, id, proposals.Proposal{}, err, form)
	}
	var edited json.RawMessage
	switch {
	case strings.TrimSpace(form.Get("arguments")) != "":
		edited = json.RawMessage(form.Get("arguments"))
	case hasArgumentFields(form):
		cur, err := s.props.Get(ctx, pr, id)
		if err != nil {
			return err
		}
		tool, ok := s.props.ToolOf(cur)
		if !ok {
			return apperr.Errorf(apperr.ECONFLICT, "The tool %q is no longer declared.", cur.Tool)
		}
		if edited, err = argumentsFromForm(tool, form); err != nil {
			return s.renderCard(c, id, proposals.Proposal{}, err, form)
		}
	}
	if grantsFormChosen(form) {
		// Approve and allow similar (grants.go): one transaction.
		choice, err := grantChoiceFromForm(form)
		if err != nil {
			return s.renderCard(c, id, proposals.Proposal{}, err, form)
		}
		p, err := s.props.ApplyAndGrant(ctx, pr, id, edited, choice)
		if err == nil {
			grantsChanged(c)
		}
		return s.renderCard(c, id, p, err, form)
	}
	p, err := s.props.Apply(ctx, pr, id, edited)
	return s.renderCard(c, id, p, err, form)
}

// performProposal handles "POST /proposals/:id/performed": the owner
// records that they performed a human-only action themselves.
func (s *Server) performProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	if err := s.requireIrreversibleAck(c, id, c.FormValue("irreversible_ack")); err != nil {
		return s.renderCard(c, id, proposals.Proposal{}, err, nil)
	}
	p, err := s.props.Perform(c.Request().Context(), principal(c), id)
	return s.renderCard(c, id, p, err, nil)
}

// rejectProposal handles "POST /proposals/:id/reject" (Reject / Discard).
func (s *Server) rejectProposal(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	reason := strings.TrimSpace(c.FormValue("reason"))
	if reason == "" && c.FormValue("discard") != "" {
		reason = "Discarded by the owner."
	}
	p, err := s.props.Reject(c.Request().Context(), principal(c), id, reason)
	return s.renderCard(c, id, p, err, nil)
}

// renderCard swaps the card in place; a refused action re-renders the card
// as it is now, with the message next to the buttons and the edit form as
// the person filled it.
func (s *Server) renderCard(c echo.Context, id uuid.UUID, p proposals.Proposal, err error, form map[string][]string) error {
	if err == nil {
		return render(c, http.StatusOK, views.ProposalCardView(s.toCard(c.Request().Context(), p)))
	}
	code := apperr.Code(err)
	if code != apperr.EINVALID && code != apperr.ECONFLICT && code != apperr.EFORBIDDEN {
		return err
	}
	cur, gerr := s.props.Get(c.Request().Context(), principal(c), id)
	if gerr != nil {
		return gerr
	}
	card := s.toCard(c.Request().Context(), cur)
	card.FormError = apperr.Message(err)
	if tool, ok := s.props.ToolOf(cur); ok && code == apperr.EINVALID && hasArgumentFields(form) {
		card.Fields = formFieldsFromInput(tool, form, err)
	}
	status := map[string]int{apperr.EINVALID: http.StatusUnprocessableEntity, apperr.ECONFLICT: http.StatusConflict, apperr.EFORBIDDEN: http.StatusForbidden}[code]
	return render(c, status, views.ProposalCardView(card))
}

// decisionLines are a call's decisions in sentences: when proposed, and at
// the moment of effect once it got there.
func decisionLines(proposed, effect *policy.Decision) []views.DecisionLine {
	var out []views.DecisionLine
	for _, d := range []struct {
		when string
		d    *policy.Decision
	}{{"proposed", proposed}, {"at-effect", effect}} {
		if d.d == nil {
			continue
		}
		line := views.DecisionLine{When: d.when, State: string(d.d.State)}
		for _, l := range d.d.Layers {
			if l.State == d.d.State {
				line.Reason = l.Reason // the strictest layer, first of equals
				break
			}
		}
		if d.d.Grant != nil {
			line.Reason = d.d.Layers[len(d.d.Layers)-1].Reason // the grant that let it through
		}
		out = append(out, line)
	}
	return out
}

// requireIrreversibleAck refuses, on the pages, to run a call that cannot
// be undone unless the person confirmed it a second time (the dialog that
// app.js opens for data-irreversible sets irreversible_ack=1). The REST
// API does not ask: its callers confirm by calling.
func (s *Server) requireIrreversibleAck(c echo.Context, id uuid.UUID, ack string) error {
	if ack == "1" {
		return nil
	}
	p, err := s.props.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	if note := irreversibleNote(p); note != "" {
		return apperr.Errorf(apperr.EINVALID, "%s Confirm it a second time to go ahead: nothing ran.", note)
	}
	return nil
}

func irreversibleNote(p proposals.Proposal) string {
	return views.IrreversibleNote(p.Tool, string(p.Effect), string(p.Authority), p.ActionClass)
}

// decidedHow says in words how a call was resolved, for the card's "who
// decided" line; empty while nobody has.
func decidedHow(p proposals.Proposal) string {
	switch {
	case p.Status == proposals.StatusRejected && p.Scope.Kind == proposals.ScopeNotebook:
		return "Discarded"
	case p.Status == proposals.StatusRejected:
		return "Rejected"
	case p.Status == proposals.StatusPending, p.Status == proposals.StatusPendingApproval, p.Status == "expired":
		return ""
	}
	switch p.ApplyPath {
	case proposals.PathAuto:
		if p.Decision != nil && p.Decision.Grant != nil {
			return "Ran under a grant"
		}
		return "Ran automatically"
	case proposals.PathApproval:
		return "Approved"
	case proposals.PathPerformed:
		return "Performed"
	case proposals.PathHuman:
		if p.Scope.Kind == proposals.ScopeNotebook {
			return "Run"
		}
		return "Approved"
	}
	return ""
}

// people names who proposed a call (the agent token by name, or the
// person) and who decided it, reading the names one by one. A name that
// cannot be read is left out rather than failing the page.
func (s *Server) people(ctx context.Context, p proposals.Proposal) (proposer, decider string) {
	var who proposals.People
	if u, err := s.q.GetUser(ctx, p.ProposedByUserID); err == nil {
		who.ProposerEmail = u.Email
	}
	if p.ProposedByTokenID.Valid {
		if t, err := s.q.GetAPIToken(ctx, p.ProposedByTokenID.UUID); err == nil {
			who.TokenName, who.TokenKind = t.Name, t.Kind
		}
	}
	if p.ResolvedByUserID.Valid {
		if u, err := s.q.GetUser(ctx, p.ResolvedByUserID.UUID); err == nil {
			who.DeciderEmail = u.Email
		}
	}
	return peopleNames(p, who)
}

// peopleNames says who proposed and who decided a call from the names
// read with it (one by one, or a page's in one query: ConversationCards).
func peopleNames(p proposals.Proposal, who proposals.People) (proposer, decider string) {
	person := who.ProposerEmail
	if person == "" {
		person = "the owner"
	}
	switch {
	case p.ProposedByTokenID.Valid:
		switch {
		case who.TokenKind == "" && p.ProposedBy == "agent":
			proposer = "an agent token"
		case who.TokenKind == "":
			proposer = person
		case who.TokenKind == "agent":
			proposer = "agent token “" + who.TokenName + "”"
		default: // a user token is the person themselves
			proposer = person + " (token “" + who.TokenName + "”)"
		}
	case p.ProposedBy == "agent":
		proposer = "an agent"
	default:
		proposer = person
	}
	if p.ResolvedByUserID.Valid {
		decider = who.DeciderEmail
	}
	return proposer, decider
}

func (s *Server) toCard(ctx context.Context, p proposals.Proposal) views.ProposalCard {
	proposer, decider := s.people(ctx, p)
	return s.cardOf(p, proposer, decider)
}

// cardOf is a proposal's card with its people already named.
func (s *Server) cardOf(p proposals.Proposal, proposer, decider string) views.ProposalCard {
	args := p.Arguments
	if len(p.AppliedArguments) > 0 {
		args = p.AppliedArguments
	}
	card := views.ProposalCard{
		ID: p.ID.String(), Tool: p.Tool, Effect: string(p.Effect), Rationale: p.Rationale, Status: p.Status,
		Disposition: p.Disposition, Arguments: string(args), Result: string(p.Result), Error: p.Error,
		RejectionReason: p.RejectionReason, ApplyPath: p.ApplyPath, ProposedBy: p.ProposedBy,
		Created:  p.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"),
		Notebook: p.Scope.Kind == proposals.ScopeNotebook,
		Risk:     string(p.Risk), Authority: string(p.Authority), ActionClass: p.ActionClass,
		CreatedAt: p.CreatedAt, Irreversible: irreversibleNote(p),
	}
	card.Proposer, card.DecidedBy, card.ViaToken = proposer, decider, p.ProposedByTokenID.Valid
	if p.Decision != nil && p.Decision.Grant != nil {
		card.DecidedBy = p.Decision.Grant.GrantedBy // who granted it, not the owner it ran for
	}
	if card.DecidedHow = decidedHow(p); card.DecidedHow != "" {
		switch {
		case p.ClaimedAt != nil:
			card.DecidedAt = *p.ClaimedAt
		case p.ResolvedAt != nil:
			card.DecidedAt = *p.ResolvedAt
		}
	} else {
		card.DecidedBy = ""
	}
	if len(p.AppliedArguments) > 0 {
		card.Changes = views.ArgumentDiff(p.Arguments, p.AppliedArguments)
	}
	if p.Packet != nil {
		card.Summary, card.ApproverRole = p.Packet.Summary, p.Packet.ApproverRole
	}
	card.Decisions = decisionLines(p.Decision, p.EffectDecision)
	card.Declared = declaredWords(p.Declaration)
	if d := p.Decision; d != nil && (p.Status == proposals.StatusPending || p.Status == proposals.StatusPendingApproval) {
		card.HumanOnly = d.State == policy.StateHumanOnly
		for _, l := range d.Layers {
			if l.State != policy.StateAllowed && l.State != policy.StateAllowedWithConstraints && l.Layer != policy.LayerScope {
				card.Reasons = append(card.Reasons, l.Reason)
			}
		}
	}
	if tool, ok := s.props.ToolOf(p); ok && p.Status == proposals.StatusPending {
		card.Fields = formFields(tool, args, nil)
	}
	return card
}
