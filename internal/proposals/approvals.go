package proposals

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/grants"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/internal/trust"
)

// Approval packet statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	ApprovalExpired  = "expired"
)

// Approval is an approval packet: a deferred call waiting for a person
// with the approver role, until it expires.
type Approval struct {
	ID              uuid.UUID
	ProposalID      uuid.UUID
	Summary         string
	ApproverRole    string
	RequiresWitness bool
	// Quorum is how many distinct approvers it needs (Needed: with a
	// witness, at least 2).
	Quorum int
	// Escalation: to whom and when it is (EscalatedAt: was) escalated
	// while pending; "" and nil when it never is.
	EscalateTo      string
	EscalateAt      *time.Time
	EscalatedAt     *time.Time
	Status          string
	Constraints     []policy.Constraint
	RejectionReason string
	CreatedAt       time.Time
	ExpiresAt       time.Time
	ResolvedAt      *time.Time

	// The call, as the approver judges it.
	Tool, ActionClass, Risk string
	Arguments               json.RawMessage
	Rationale               string
	Scope                   Scope
	ProposedBy              string // "agent" or "user"
	ProposerEmail           string
	ProposerID              uuid.UUID
	Decision                *policy.Decision
	// EffectDecision is the decision taken when the call last reached
	// effect (an owner's confirm that escalated it, or this approval).
	EffectDecision *policy.Decision
	// ProposedArguments is what the agent proposed, when the owner edited
	// the call before it reached an approver (Arguments is what will run).
	ProposedArguments json.RawMessage
	OwnerID           uuid.UUID
	ProposalStatus    string
	Result            json.RawMessage
	Error             string
	Voters            []uuid.UUID
	Similar           []Similar

	// What the inbox shows beside the call: the tool's declared effect,
	// the agent token that proposed it (by name; "" for a person), the
	// origin's title, who resolved it, and the votes so far.
	Effect          string
	TokenName       string
	OriginTitle     string
	ResolvedByEmail string
	VoteCount       int
	Votes           []Vote
}

// Vote is one approver's approval of a packet.
type Vote struct {
	Email string
	At    time.Time
}

// Similar is an earlier decided call of the same action class, for the
// approver's history.
type Similar struct {
	ID        uuid.UUID
	Tool      string
	Status    string
	Arguments json.RawMessage
	CreatedAt time.Time
	ApplyPath string
}

// Needed is how many distinct approvers the packet needs: its quorum,
// and at least 2 when it requires a witness.
func (a Approval) Needed() int { return needed(a.Quorum, a.RequiresWitness) }

func needed(quorum int, witness bool) int {
	if witness {
		return max(quorum, 2)
	}
	return max(quorum, 1)
}

// ResolverRoles are the roles whose holders may resolve it now: its
// approver role, and once escalated the role it was escalated to.
func (a Approval) ResolverRoles() []string {
	if a.EscalatedAt != nil && a.EscalateTo != "" && a.EscalateTo != a.ApproverRole {
		return []string{a.ApproverRole, a.EscalateTo}
	}
	return []string{a.ApproverRole}
}

// TTL is the time left before the packet expires (0 when past).
func (a Approval) TTL(now time.Time) time.Duration { return max(0, a.ExpiresAt.Sub(now)) }

// ApprovalFilter narrows the queue; empty fields match anything.
type ApprovalFilter struct {
	Status, Tool, ActionClass, Risk string
}

// ApprovalStatuses are the packet statuses a filter may name.
var ApprovalStatuses = []string{ApprovalPending, ApprovalApproved, ApprovalRejected, ApprovalExpired}

// Validate refuses filter values that can match nothing by mistake (an
// unknown status or risk, an overlong action class), naming the field, so
// a page can say so instead of showing an empty queue.
func (f ApprovalFilter) Validate() error {
	var fields []apperr.FieldError
	if f.Status != "" && !slices.Contains(ApprovalStatuses, f.Status) {
		fields = append(fields, apperr.FieldError{Field: "status", Message: fmt.Sprintf("%q is not a status; choose pending, approved, rejected or expired", clip.Ellipsis(f.Status, 40))})
	}
	if f.Risk != "" && !policy.Risk(f.Risk).Valid() {
		fields = append(fields, apperr.FieldError{Field: "risk", Message: fmt.Sprintf("%q is not a risk; choose low, medium or high", clip.Ellipsis(f.Risk, 40))})
	}
	if utf8.RuneCountInString(f.Tool) > 200 {
		fields = append(fields, apperr.FieldError{Field: "tool", Message: "is longer than 200 characters"})
	}
	if utf8.RuneCountInString(f.ActionClass) > 200 {
		fields = append(fields, apperr.FieldError{Field: "action_class", Message: "is longer than 200 characters"})
	}
	if len(fields) > 0 {
		return apperr.Invalid("The filter "+fields[0].Field+" "+strings.TrimPrefix(fields[0].Message, "is ")+".", fields...)
	}
	return nil
}

// ApprovalCounts are the inbox's filter counts: each status under the
// other filters, and each risk under the status filter.
type ApprovalCounts struct {
	Pending, Approved, Rejected, Expired, AnyStatus BoundedCount
	High, Medium, Low, AnyRisk                      BoundedCount
}

// BoundedCount is a count that reads a bounded number of rows: N is exact
// unless AtLeast, when the count stopped reading at its budget and there
// are at least N.
type BoundedCount struct {
	N       int
	AtLeast bool
}

// ErrApprovalNotFound is a packet that is not in the caller's workspace.
var ErrApprovalNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such approval.")

// summarize is the packet's one readable sentence.
func summarize(tool *tools.Tool, args json.RawMessage) string {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	if tool.Contract.Summarize != nil {
		if s := strings.TrimSpace(tool.Contract.Summarize(m)); s != "" {
			return clip.Ellipsis(s, 500)
		}
	}
	var parts []string
	for _, p := range tool.Params() {
		if v, ok := m[p.Name]; ok {
			b, _ := json.Marshal(v)
			parts = append(parts, p.Name+" "+clip.Ellipsis(string(b), 60))
		}
	}
	return clip.Ellipsis(fmt.Sprintf("Run %s: %s", tool.Name, strings.Join(parts, ", ")), 500)
}

// openPacket creates the approval packet of a deferred proposal, in its
// transaction.
func (s *Service) openPacket(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, proposalID uuid.UUID, args json.RawMessage, constraints []policy.Constraint) (db.Approval, error) {
	witness := false
	for _, c := range constraints {
		witness = witness || c.Kind == policy.ConstraintRequiresWitness
	}
	role := tool.Contract.Gating.ApproverRole
	if role == "" {
		role = string(auth.RoleApprover)
	}
	g := tool.Contract.Gating
	a, err := q.InsertApproval(ctx, db.InsertApprovalParams{WorkspaceID: p.WorkspaceID, ProposalID: proposalID,
		Summary: summarize(tool, args), ApproverRole: role, RequiresWitness: witness, Constraints: json.RawMessage(`[]`),
		ExpiresAt: time.Now().Add(g.Window), ToolQuorum: int32(g.Quorum), ToolEscalateMinutes: int32(g.Escalation.After / time.Minute),
		ToolEscalateTo: g.Escalation.To})
	if err != nil {
		return db.Approval{}, fmt.Errorf("proposals: open approval packet: %w", err)
	}
	return a, nil
}

// ApprovalsChannel is the topic of approval events: live queues follow
// "<workspace id>:approvals".
const ApprovalsChannel = events.TopicApprovals

// canResolve says whether p may resolve packets that wait for role, from
// the roles the request authenticated with (see auth.Principal.MayResolve).
func canResolve(p auth.Principal, role string) error {
	if p.IsAgent() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot resolve approvals; a person with the approver role does.")
	}
	if !p.MayResolve(role) {
		return apperr.Errorf(apperr.EFORBIDDEN, "This approval waits for the %s role, which you do not hold.", role)
	}
	return nil
}

// mayOpenQueue says whether p resolves any packets at all.
func mayOpenQueue(p auth.Principal) error {
	if p.IsAgent() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot resolve approvals; a person with the approver role does.")
	}
	if !p.CanResolveSome() {
		return apperr.Errorf(apperr.EFORBIDDEN, "The approvals queue is for approvers.")
	}
	return nil
}

// resolvableRoles are the packet roles p may resolve: the queue shows each
// approver only those.
func resolvableRoles(p auth.Principal) []string {
	var roles []string
	for _, r := range []string{string(auth.RoleApprover), string(auth.RoleAdmin)} {
		if p.MayResolve(r) {
			roles = append(roles, r)
		}
	}
	return append(roles, p.ApproverRoles...)
}

// Paging the queue: a page holds ApprovalPageDefault packets unless the
// caller asks for 1 to ApprovalPageMax. Each page reads at most
// ApprovalPageBudget packets of its list (a narrow filter's page may hold
// fewer than asked; ApprovalPage.Partial), each filter count at most
// ApprovalCountBudget and the header's count at most waitingPacketsBudget
// (with WaitingPacketsCap matches): no read grows with the history of
// approved, rejected and expired packets, which is never deleted.
const (
	ApprovalPageDefault  = 50
	ApprovalPageMax      = 200
	ApprovalPageBudget   = 500
	ApprovalCountBudget  = 100
	WaitingPacketsCap    = 99
	waitingPacketsBudget = 1000
)

// ApprovalPageRequest says which page of the queue to read: Cursor is the
// Next of the page before ("" for the first page), Limit how many packets
// (1 to ApprovalPageMax).
type ApprovalPageRequest struct {
	Cursor string
	Limit  int
}

// ApprovalPage is one page of the queue, in its list's order: pending
// packets soonest expiry first, the others (and any status) newest first.
type ApprovalPage struct {
	Approvals []Approval
	// Next is the cursor of the page after this one; "" on the last page.
	Next string
	// Partial says the page read its budget of packets before it filled:
	// fewer packets matched the filter than asked, and more may match
	// after Next.
	Partial bool
}

// Approvals is one page of the queue of the caller's workspace: the
// packets they may resolve, under the filter, from the request's cursor.
// A cursor that was altered, or belongs to another filter, list or user,
// and a limit out of range are EINVALID naming the parameter (nothing is
// read).
func (s *Service) Approvals(ctx context.Context, p auth.Principal, f ApprovalFilter, req ApprovalPageRequest) (ApprovalPage, error) {
	if err := mayOpenQueue(p); err != nil {
		return ApprovalPage{}, err
	}
	if err := f.Validate(); err != nil {
		return ApprovalPage{}, err
	}
	if req.Limit < 1 || req.Limit > ApprovalPageMax {
		return ApprovalPage{}, apperr.Invalid(fmt.Sprintf("The limit must be a number from 1 to %d.", ApprovalPageMax),
			apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", ApprovalPageMax)})
	}
	key, err := s.cursorKey.Get(ctx)
	if err != nil {
		return ApprovalPage{}, err
	}
	cur := newApprovalCursors(key, p, f)
	var pos queuePosition
	if req.Cursor != "" {
		var ok bool
		if pos, ok = cur.decode(req.Cursor); !ok {
			return ApprovalPage{}, ErrApprovalCursor
		}
	}
	rows, err := s.queuePage(ctx, p, f, pos, req.Cursor != "", req.Limit+1)
	if err != nil {
		return ApprovalPage{}, err
	}
	var page ApprovalPage
	var ids []uuid.UUID
	for _, r := range rows {
		if r.matched && len(ids) < req.Limit {
			ids = append(ids, r.id)
			pos = r.pos
		}
	}
	switch n := len(rows); {
	case n > 0 && matchedRows(rows) > req.Limit:
		page.Next = cur.encode(pos) // after the last packet shown
	case n > 0 && rows[n-1].lastRead:
		// The page read its budget: the next one starts after the last
		// packet read, matched or not.
		page.Next, page.Partial = cur.encode(rows[n-1].pos), len(ids) < req.Limit
	}
	if len(ids) == 0 {
		return page, nil
	}
	details, err := s.q.ListApprovalsByID(ctx, db.ListApprovalsByIDParams{WorkspaceID: p.WorkspaceID, Ids: ids, Roles: resolvableRoles(p)})
	if err != nil {
		return ApprovalPage{}, fmt.Errorf("proposals: list approvals: %w", err)
	}
	byID := make(map[uuid.UUID]db.ListApprovalsByIDRow, len(details))
	for _, r := range details {
		byID[r.ID] = r
	}
	page.Approvals = make([]Approval, 0, len(ids))
	for _, id := range ids {
		r, ok := byID[id]
		if !ok {
			continue
		}
		a := approvalFrom(db.Approval{ID: r.ID, ProposalID: r.ProposalID, Summary: r.Summary, ApproverRole: r.ApproverRole,
			RequiresWitness: r.RequiresWitness, Status: r.Status, Constraints: r.Constraints, RejectionReason: r.RejectionReason,
			CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, ResolvedAt: r.ResolvedAt,
			Quorum: r.Quorum, EscalateTo: r.EscalateTo, EscalateAt: r.EscalateAt, EscalatedAt: r.EscalatedAt})
		a.Tool, a.ActionClass, a.Risk, a.Arguments, a.Rationale = r.Tool, r.ActionClass.String, r.Risk.String, r.Arguments, r.Rationale
		a.Scope, a.ProposedBy, a.ProposerEmail = scopeOfIDs(r.ConversationID, r.NotebookID), r.ProposedByKind, r.ProposerEmail
		a.Effect, a.TokenName, a.OriginTitle, a.ResolvedByEmail, a.VoteCount = r.Effect, r.TokenName.String, r.OriginTitle, r.ResolverEmail.String, int(r.Votes)
		page.Approvals = append(page.Approvals, a)
	}
	return page, nil
}

// queueRow is one packet a page query read: where it stands in its list,
// whether it matched the filter, and whether it was the last the page's
// budget allowed.
type queueRow struct {
	id                uuid.UUID
	pos               queuePosition
	matched, lastRead bool
}

func matchedRows(rows []queueRow) int {
	n := 0
	for _, r := range rows {
		if r.matched {
			n++
		}
	}
	return n
}

// queuePage reads one page of the filter's list from pos (from the start
// when !from): the pending queue by expiry, a resolved status or any
// status newest first, each through its index (migration 29).
func (s *Service) queuePage(ctx context.Context, p auth.Principal, f ApprovalFilter, pos queuePosition, from bool, limit int) ([]queueRow, error) {
	roles := resolvableRoles(p)
	var out []queueRow
	switch f.Status {
	case ApprovalPending:
		if !from {
			pos = queuePosition{At: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)} // before every packet
		}
		rows, err := s.q.ListPendingApprovalsPage(ctx, db.ListPendingApprovalsPageParams{Budget: ApprovalPageBudget, Roles: roles,
			Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk, WorkspaceID: p.WorkspaceID, AfterAt: pos.At, AfterID: pos.ID, PageLimit: int32(limit)})
		if err != nil {
			return nil, fmt.Errorf("proposals: list approvals: %w", err)
		}
		for _, r := range rows {
			out = append(out, queueRow{id: r.ID, pos: queuePosition{At: r.At, ID: r.ID}, matched: r.Matched, lastRead: r.LastRead})
		}
	case "":
		if !from {
			pos = queuePosition{At: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), ID: uuid.Max} // after every packet
		}
		rows, err := s.q.ListApprovalsPageAnyStatus(ctx, db.ListApprovalsPageAnyStatusParams{Budget: ApprovalPageBudget, Roles: roles,
			Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk, WorkspaceID: p.WorkspaceID, BeforeAt: pos.At, BeforeID: pos.ID, PageLimit: int32(limit)})
		if err != nil {
			return nil, fmt.Errorf("proposals: list approvals: %w", err)
		}
		for _, r := range rows {
			out = append(out, queueRow{id: r.ID, pos: queuePosition{At: r.At, ID: r.ID}, matched: r.Matched, lastRead: r.LastRead})
		}
	default:
		if !from {
			pos = queuePosition{At: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), ID: uuid.Max}
		}
		rows, err := s.q.ListApprovalsPageByStatus(ctx, db.ListApprovalsPageByStatusParams{Budget: ApprovalPageBudget, Roles: roles,
			Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk, WorkspaceID: p.WorkspaceID, Status: f.Status, BeforeAt: pos.At, BeforeID: pos.ID,
			PageLimit: int32(limit)})
		if err != nil {
			return nil, fmt.Errorf("proposals: list approvals: %w", err)
		}
		for _, r := range rows {
			out = append(out, queueRow{id: r.ID, pos: queuePosition{At: r.At, ID: r.ID}, matched: r.Matched, lastRead: r.LastRead})
		}
	}
	return out, nil
}

// CountApprovals counts the caller's packets per filter value, in one
// query, for the inbox's filter bar; each count reads at most
// ApprovalCountBudget packets (BoundedCount.AtLeast past it).
func (s *Service) CountApprovals(ctx context.Context, p auth.Principal, f ApprovalFilter) (ApprovalCounts, error) {
	if err := mayOpenQueue(p); err != nil {
		return ApprovalCounts{}, err
	}
	if err := f.Validate(); err != nil {
		return ApprovalCounts{}, err
	}
	rows, err := s.q.CountApprovals(ctx, db.CountApprovalsParams{WorkspaceID: p.WorkspaceID, Roles: resolvableRoles(p),
		Status: f.Status, Tool: f.Tool, ActionClass: f.ActionClass, Risk: f.Risk, Budget: ApprovalCountBudget})
	if err != nil {
		return ApprovalCounts{}, fmt.Errorf("proposals: count approvals: %w", err)
	}
	var n ApprovalCounts
	statuses := map[string]*BoundedCount{ApprovalPending: &n.Pending, ApprovalApproved: &n.Approved, ApprovalRejected: &n.Rejected,
		ApprovalExpired: &n.Expired, "": &n.AnyStatus}
	for _, r := range rows {
		atLeast := r.Read >= ApprovalCountBudget
		if c, ok := statuses[r.Status]; ok {
			*c = BoundedCount{N: int(r.Matched), AtLeast: atLeast}
		}
		if r.Status == f.Status {
			n.High, n.Medium, n.Low = BoundedCount{int(r.High), atLeast}, BoundedCount{int(r.Medium), atLeast}, BoundedCount{int(r.Low), atLeast}
			n.AnyRisk = BoundedCount{int(r.AnyRisk), atLeast}
		}
	}
	return n, nil
}

// Approval is one packet with everything an approver needs: the call,
// every decision layer's reason, who voted, and similar earlier calls.
func (s *Service) Approval(ctx context.Context, p auth.Principal, id uuid.UUID) (Approval, error) {
	if err := mayOpenQueue(p); err != nil {
		return Approval{}, err
	}
	r, err := s.q.GetApprovalDetail(ctx, db.GetApprovalDetailParams{ID: id, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, ErrApprovalNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("proposals: get approval: %w", err)
	}
	a := approvalFrom(db.Approval{ID: r.ID, ProposalID: r.ProposalID, Summary: r.Summary, ApproverRole: r.ApproverRole,
		RequiresWitness: r.RequiresWitness, Status: r.Status, Constraints: r.Constraints, RejectionReason: r.RejectionReason,
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, ResolvedAt: r.ResolvedAt,
		Quorum: r.Quorum, EscalateTo: r.EscalateTo, EscalateAt: r.EscalateAt, EscalatedAt: r.EscalatedAt})
	if !slices.ContainsFunc(a.ResolverRoles(), p.MayResolve) {
		return Approval{}, ErrApprovalNotFound // the queue shows each approver only what they may resolve
	}
	a.Tool, a.ActionClass, a.Risk, a.Arguments, a.Rationale = r.Tool, r.ActionClass.String, r.Risk.String, r.Arguments, r.Rationale
	a.Scope, a.ProposedBy, a.ProposerEmail, a.ProposerID = scopeOfIDs(r.ConversationID, r.NotebookID), r.ProposedByKind, r.ProposerEmail, r.ProposedByUserID
	a.Decision, a.ProposalStatus, a.Result, a.Error = decodeDecision(r.Decision), r.ProposalStatus, r.Result, r.Error.String
	a.EffectDecision, a.OwnerID = decodeDecision(r.EffectDecision), r.OwnerID
	a.Effect, a.TokenName, a.OriginTitle, a.ResolvedByEmail = r.Effect, r.TokenName.String, r.OriginTitle, r.ResolverEmail.String
	if len(r.AppliedArguments) > 0 {
		// The owner edited the call before it needed an approver: the
		// approver judges what will run, beside what the agent proposed.
		a.ProposedArguments, a.Arguments = r.Arguments, r.AppliedArguments
	}
	votes, err := s.q.ListApprovalVotesDetail(ctx, db.ListApprovalVotesDetailParams{WorkspaceID: p.WorkspaceID, ApprovalID: id})
	if err != nil {
		return Approval{}, fmt.Errorf("proposals: approval votes: %w", err)
	}
	for _, v := range votes {
		a.Voters = append(a.Voters, v.UserID)
		a.Votes = append(a.Votes, Vote{Email: v.Email, At: v.CreatedAt})
	}
	a.VoteCount = len(votes)
	if !r.ActionClass.Valid {
		return a, nil // a call that could not be classified has no class to compare
	}
	// Similar calls are those of the same action class that were decided:
	// what people (and the automatic path) did with calls like this one,
	// read through proposals_decided_idx, so that no index on the calls'
	// tool costs every call a write.
	similar, err := s.q.ListSimilarProposals(ctx, db.ListSimilarProposalsParams{WorkspaceID: p.WorkspaceID, ActionClass: r.ActionClass, ID: r.ProposalID})
	if err != nil {
		return Approval{}, fmt.Errorf("proposals: similar calls: %w", err)
	}
	for _, s := range similar {
		a.Similar = append(a.Similar, Similar{ID: s.ID, Tool: s.Tool, Status: s.Status, Arguments: s.Arguments, CreatedAt: s.CreatedAt, ApplyPath: s.ApplyPath.String})
	}
	return a, nil
}

// Approve records p's approval of a packet and, once the packet has the
// approvals it needs, runs the exact call that was approved, through the
// effect-time decision every path shares, once — whatever the number of
// concurrent approvers (the others get 409). It is one atomic outcome: the
// vote, the packet's resolution and the call's claim (for an in-database
// tool, its result too) commit together, so a packet is never approved
// while its call waits. An expired packet is 410 and runs nothing. Nobody
// approves their own proposal; a packet that requires a witness (declared,
// or asked for by an approver's requires_witness) runs on the second
// distinct approver other than the proposer and the owner. Constraints
// attached by every approver are checked when the call runs; a call that
// breaks one ends failed with the reason, its packet approved.
func (s *Service) Approve(ctx context.Context, p auth.Principal, id uuid.UUID, constraints []policy.Constraint) (Approval, Proposal, error) {
	return s.approve(ctx, p, id, constraints, nil)
}

// approve is Approve, and with a grant chosen (ApproveAndGrant) creates
// the grant with the call's claim.
func (s *Service) approve(ctx context.Context, p auth.Principal, id uuid.UUID, constraints []policy.Constraint, grant *grants.Choice) (Approval, Proposal, error) {
	if constraints == nil {
		constraints = []policy.Constraint{}
	}
	var fields []apperr.FieldError
	for i, c := range constraints {
		if err := c.Validate(); err != nil {
			fields = append(fields, apperr.FieldError{Field: fmt.Sprintf("constraints.%d", i), Message: err.Error()})
		}
	}
	if len(fields) > 0 {
		return Approval{}, Proposal{}, apperr.Invalid("Some constraints are not valid: "+fields[0].Message+".", fields...)
	}
	mine, err := json.Marshal(constraints)
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: encode constraints: %w", err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	a, prop, err := s.resolvable(ctx, q, p, id)
	if err != nil {
		return Approval{}, Proposal{}, err
	}
	// The decision is taken again before anything is recorded: a call that
	// has become human-only or blocked is refused, and the packet stays.
	ec, err := s.atEffect(ctx, q, p, prop, nil, policy.PathApproval)
	if err != nil {
		return Approval{}, Proposal{}, err
	}
	if ec.outcome != policy.OutcomeRun {
		_, err := s.refuseAtEffect(ctx, tx, q, p, ec, policy.PathApproval, aboveCeiling(ec, policy.PathApproval))
		return Approval{}, Proposal{}, err
	}
	// A constraint that can never hold where the call takes effect is
	// refused now, with the reason, rather than failing the call later.
	for i, c := range constraints {
		if c.Kind != policy.ConstraintStagingOnly {
			continue
		}
		if why := policy.StagingOnlyNeverHolds(cmp.Or(ec.d.scope.environment, s.env)); why != "" {
			return Approval{}, Proposal{}, apperr.Invalid("Nothing was approved: "+why+".",
				apperr.FieldError{Field: fmt.Sprintf("constraints.%d", i), Message: why})
		}
	}
	if _, err := q.AddApprovalVote(ctx, db.AddApprovalVoteParams{WorkspaceID: a.WorkspaceID, ApprovalID: id, UserID: p.UserID, Constraints: mine}); err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: vote: %w", err)
	}
	votes, err := q.ListApprovalVotes(ctx, db.ListApprovalVotesParams{WorkspaceID: a.WorkspaceID, ApprovalID: id})
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: votes: %w", err)
	}
	voters, approvers, attached, err := tallyVotes(votes, prop)
	if err != nil {
		return Approval{}, Proposal{}, err
	}
	witness := a.RequiresWitness || slices.ContainsFunc(attached, func(c policy.Constraint) bool { return c.Kind == policy.ConstraintRequiresWitness }) ||
		slices.ContainsFunc(ec.d.constraints, func(c policy.Constraint) bool { return c.Kind == policy.ConstraintRequiresWitness })
	need := needed(int(a.Quorum), witness)
	if grant != nil && need > 1 {
		// No grant stands in for another approver: refused, nothing done.
		return Approval{}, Proposal{}, apperr.Invalid(fmt.Sprintf("This packet needs %d approvers: a grant never stands in for another approver. Nothing was done.", need),
			apperr.FieldError{Field: "grant", Message: fmt.Sprintf("cannot be given on a packet that needs %d approvers", need)})
	}
	// One approver may be anyone who may resolve it but the proposer; a
	// witness or a quorum counts distinct approvers who are neither the
	// proposer nor the scope's owner.
	counted := voters
	if need > 1 {
		counted = approvers
	}
	if len(counted) < need {
		if witness && !a.RequiresWitness {
			if err := q.RequireWitness(ctx, db.RequireWitnessParams{ID: id, WorkspaceID: a.WorkspaceID}); err != nil {
				return Approval{}, Proposal{}, fmt.Errorf("proposals: require witness: %w", err)
			}
			a.RequiresWitness = true
		}
		action := "approval.witnessed"
		if a.Quorum > 1 {
			action = "approval.voted"
		}
		if err := s.audit(ctx, q, p, ec.tool, action, "approval", id.String(), map[string]any{
			"proposal_id": prop.ID, "constraints": constraints, "approvers": len(counted), "needed": need}); err != nil {
			return Approval{}, Proposal{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return Approval{}, Proposal{}, fmt.Errorf("proposals: commit vote: %w", err)
		}
		s.announce(prop, true)
		out := approvalFrom(a)
		out.Voters = voters
		out.VoteCount = len(counted)
		return out, fromRow(prop), nil
	}
	cs, err := json.Marshal(attached)
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: encode constraints: %w", err)
	}
	resolved, err := q.ResolveApproval(ctx, db.ResolveApprovalParams{ID: id, WorkspaceID: a.WorkspaceID, Status: ApprovalApproved, Constraints: cs, ResolvedBy: nullUUID(p.UserID)})
	if errors.Is(err, pgx.ErrNoRows) {
		tx.Rollback(ctx)
		return Approval{}, Proposal{}, s.notResolvable(ctx, p, id)
	}
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: resolve approval: %w", err)
	}
	if len(attached) > 0 {
		if err := q.AddProposalConstraints(ctx, db.AddProposalConstraintsParams{ID: prop.ID, WorkspaceID: prop.WorkspaceID, Constraints: cs}); err != nil {
			return Approval{}, Proposal{}, fmt.Errorf("proposals: attach constraints: %w", err)
		}
		ec.stored = append(ec.stored, attached...)
		prop.Constraints, _ = json.Marshal(ec.stored)
		ec.cur = prop
	}
	if err := s.audit(ctx, q, p, ec.tool, "approval.approved", "approval", id.String(), map[string]any{
		"proposal_id": prop.ID, "constraints": attached, "voters": voters}); err != nil {
		return Approval{}, Proposal{}, err
	}
	out := approvalFrom(resolved)
	out.Voters = voters
	claimed, err := s.claim(ctx, tx, q, p, ec, policy.PathApproval)
	if err != nil {
		return Approval{}, Proposal{}, err
	}
	names := make([]string, len(approvers))
	for i, v := range approvers {
		names[i] = v.String()
	}
	if cerr := s.checkConstraints(ctx, q, p, ec.tool, ec.args, ec.d, ec.stored, names); cerr != nil {
		if apperr.Code(cerr) != apperr.EFORBIDDEN {
			return Approval{}, Proposal{}, cerr
		}
		// Approved, but the call breaks a constraint now: it ends failed
		// with the reason, in the same transaction as the approval.
		row, err := s.finish(ctx, q, p, claimed, ec.tool, PathApproval, nil, apperr.Message(cerr), false, true)
		if err != nil {
			return Approval{}, Proposal{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return Approval{}, Proposal{}, fmt.Errorf("proposals: commit approval: %w", err)
		}
		s.announce(row, true)
		return out, fromRow(row), nil
	}
	if grant != nil {
		if err := s.grantWith(ctx, q, p, ec, policy.StateDeferred, uuid.NullUUID{UUID: id, Valid: true}, a.ApproverRole, witness, *grant); err != nil {
			return Approval{}, Proposal{}, err
		}
	}
	ran, err := s.run(ctx, tx, q, p, claimed, ec.tool, ec.args, ec.d.ws, PathApproval, allConstraints(ec.d, ec.stored))
	// run announced the call's changes; the packet was resolved with its claim.
	s.announceApprovals(p.WorkspaceID)
	return out, ran, err
}

// tallyVotes reads the votes: every voter, the approvers who count for a
// witness (not the proposer, not the scope's owner), and the constraints
// every voter attached.
func tallyVotes(votes []db.ListApprovalVotesRow, prop db.Proposal) (voters, approvers []uuid.UUID, attached []policy.Constraint, err error) {
	attached = []policy.Constraint{}
	for _, v := range votes {
		voters = append(voters, v.UserID)
		if v.UserID != prop.ProposedByUserID && v.UserID != prop.OwnerID {
			approvers = append(approvers, v.UserID)
		}
		var cs []policy.Constraint
		if err := json.Unmarshal(v.Constraints, &cs); err != nil {
			return nil, nil, nil, fmt.Errorf("proposals: decode vote constraints: %w", err)
		}
		attached = append(attached, cs...)
	}
	return voters, approvers, attached, nil
}

// Reject resolves a packet with a reason the agent reads on its proposal.
func (s *Service) RejectApproval(ctx context.Context, p auth.Principal, id uuid.UUID, reason string) (Approval, Proposal, error) {
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n < 1 || n > 500 {
		return Approval{}, Proposal{}, apperr.Invalid("Give a reason of 1 to 500 characters.", apperr.FieldError{Field: "reason", Message: "must have 1 to 500 characters"})
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	a, prop, err := s.resolvable(ctx, q, p, id)
	if err != nil {
		return Approval{}, Proposal{}, err
	}
	resolved, err := q.ResolveApproval(ctx, db.ResolveApprovalParams{ID: id, WorkspaceID: a.WorkspaceID, Status: ApprovalRejected, Constraints: json.RawMessage(`[]`),
		RejectionReason: pgtype.Text{String: reason, Valid: true}, ResolvedBy: nullUUID(p.UserID)})
	if errors.Is(err, pgx.ErrNoRows) {
		tx.Rollback(ctx)
		return Approval{}, Proposal{}, s.notResolvable(ctx, p, id)
	}
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: resolve approval: %w", err)
	}
	row, err := q.RejectProposal(ctx, db.RejectProposalParams{ID: prop.ID, WorkspaceID: prop.WorkspaceID, RejectionReason: pgtype.Text{String: reason, Valid: true},
		ResolvedByUserID: nullUUID(p.UserID), FromStatus: StatusPendingApproval})
	if err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: reject proposal: %w", err)
	}
	keep := audit.DefaultRetention
	if tool, ok := s.toolOf(prop.Tool, prop.CallerDeclaration); ok {
		keep = tool.Contract.Retention
	}
	if err := audit.RecordRetained(ctx, q, p, p.WorkspaceID, keep, "approval.rejected", "approval", id.String(), map[string]any{
		"proposal_id": prop.ID, "reason": reason}); err != nil {
		return Approval{}, Proposal{}, err
	}
	if err := s.rejected(ctx, q, p, row, reason); err != nil {
		return Approval{}, Proposal{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Approval{}, Proposal{}, fmt.Errorf("proposals: commit rejection: %w", err)
	}
	s.announce(row, true)
	return approvalFrom(resolved), fromRow(row), nil
}

// resolvable checks that p may resolve the packet now: the role, not their
// own proposal, still pending, not expired (an expired packet is marked so
// and answers 410).
func (s *Service) resolvable(ctx context.Context, q *db.Queries, p auth.Principal, id uuid.UUID) (db.Approval, db.Proposal, error) {
	if err := mayOpenQueue(p); err != nil {
		return db.Approval{}, db.Proposal{}, err
	}
	a, err := q.GetApprovalForUpdate(ctx, db.GetApprovalForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return db.Approval{}, db.Proposal{}, ErrApprovalNotFound
	}
	if err != nil {
		return db.Approval{}, db.Proposal{}, fmt.Errorf("proposals: get approval: %w", err)
	}
	if err := s.holdsResolverRole(ctx, q, p, a); err != nil {
		return db.Approval{}, db.Proposal{}, err
	}
	prop, err := q.GetProposalInWorkspaceForUpdate(ctx, db.GetProposalInWorkspaceForUpdateParams{ID: a.ProposalID, WorkspaceID: p.WorkspaceID})
	if err != nil {
		return db.Approval{}, db.Proposal{}, fmt.Errorf("proposals: get proposal: %w", err)
	}
	if prop.ProposedByUserID == p.UserID {
		return db.Approval{}, db.Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Nobody approves their own proposal; another approver must.")
	}
	if a.Status == ApprovalPending && !a.ExpiresAt.After(time.Now()) {
		return db.Approval{}, db.Proposal{}, expiredError(a)
	}
	if a.Status != ApprovalPending {
		return db.Approval{}, db.Proposal{}, resolvedError(a)
	}
	return a, prop, nil
}

// holdsResolverRole checks that p holds a role that resolves the packet
// now: its approver role, or the role it was escalated to. A named role is
// read again from the rows, in this transaction: one revoked a moment ago
// no longer resolves a packet.
func (s *Service) holdsResolverRole(ctx context.Context, q *db.Queries, p auth.Principal, a db.Approval) error {
	roles := a.ResolverRoles
	if len(roles) == 0 {
		roles = []string{a.ApproverRole}
	}
	var refused error
	for _, role := range roles {
		if err := canResolve(p, role); err != nil {
			refused = err
			continue
		}
		if isWorkspaceRole(role) {
			return nil
		}
		held, err := q.HoldsApproverRole(ctx, db.HoldsApproverRoleParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Role: role})
		if err != nil {
			return fmt.Errorf("proposals: read approver role: %w", err)
		}
		if held {
			return nil
		}
	}
	if len(roles) > 1 && !p.IsAgent() {
		return apperr.Errorf(apperr.EFORBIDDEN, "This approval waits for the %s role, or the %s role it was escalated to; you hold neither.", roles[0], roles[1])
	}
	if refused != nil {
		return refused
	}
	return apperr.Errorf(apperr.EFORBIDDEN, "This approval waits for the %s role, which you do not hold.", roles[0])
}

func isWorkspaceRole(role string) bool {
	return role == string(auth.RoleApprover) || role == string(auth.RoleAdmin)
}

// notResolvable explains a lost race: another approver resolved it first,
// or it expired meanwhile.
func (s *Service) notResolvable(ctx context.Context, p auth.Principal, id uuid.UUID) error {
	a, err := s.q.GetApproval(ctx, db.GetApprovalParams{ID: id, WorkspaceID: p.WorkspaceID})
	if err != nil {
		return fmt.Errorf("proposals: get approval: %w", err)
	}
	if a.Status == ApprovalExpired || (a.Status == ApprovalPending && !a.ExpiresAt.After(time.Now())) {
		return expiredError(a)
	}
	return resolvedError(a)
}

func expiredError(a db.Approval) error {
	e := apperr.Errorf(apperr.EGONE, "This approval expired at %s; the call did not run. The agent must propose it again.", a.ExpiresAt.UTC().Format(time.RFC3339))
	e.Extra = map[string]any{"approval_status": ApprovalExpired}
	return e
}

func resolvedError(a db.Approval) error {
	if a.Status == ApprovalExpired {
		return expiredError(a)
	}
	e := apperr.Errorf(apperr.ECONFLICT, "This approval was %s already.", a.Status)
	e.Extra = map[string]any{"approval_status": a.Status}
	return e
}

// ExpireApprovals marks pending packets past their expiry, and their
// proposals, expired; the sweeper calls it. It returns the approvals.
func (s *Service) ExpireApprovals(ctx context.Context) ([]uuid.UUID, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	rows, err := q.ExpireApprovals(ctx)
	if err != nil {
		return nil, fmt.Errorf("proposals: expire approvals: %w", err)
	}
	ids := make([]uuid.UUID, len(rows))
	changed := make([]db.Proposal, 0, len(rows))
	for i, r := range rows {
		ids[i] = r.ApprovalID
		system := auth.Principal{WorkspaceID: r.WorkspaceID}
		if err := audit.Record(ctx, q, system, r.WorkspaceID, "approval.expired", "approval", r.ApprovalID.String(),
			map[string]any{"proposal_id": r.ID}); err != nil {
			return nil, err
		}
		// The expiry's receipt, and nobody's judgment: the call was held.
		prop, err := q.GetProposalInWorkspace(ctx, db.GetProposalInWorkspaceParams{ID: r.ID, WorkspaceID: r.WorkspaceID})
		if err != nil {
			return nil, fmt.Errorf("proposals: get expired proposal: %w", err)
		}
		rid, err := s.record(ctx, q, system, receipts.KindExpiry, "expired", prop, "Nobody approved it in time; it did not run.")
		if err != nil {
			return nil, err
		}
		if err := s.judge(ctx, q, system, prop, trust.LabelHeld, rid); err != nil {
			return nil, err
		}
		changed = append(changed, prop)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("proposals: commit expiry: %w", err)
	}
	for _, prop := range changed {
		s.announce(prop, true)
	}
	return ids, nil
}

// escalateBatch bounds one sweep's escalations (the next sweep takes the
// rest).
const escalateBatch = 500

// EscalateApprovals escalates the pending packets whose escalation is due
// at now (the sweeper passes the time; tests pass a later one): the role
// they were escalated to may resolve them from then on, the notifications
// fold tells its holders (the audit row approval.escalated is its feed),
// and an agent that asks for the outcome reads that the call still waits,
// escalated. Nothing about the call changes: it still runs only when
// approved, and fails closed at expiry. It returns the packets.
func (s *Service) EscalateApprovals(ctx context.Context, now time.Time) ([]uuid.UUID, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	rows, err := q.EscalateApprovals(ctx, db.EscalateApprovalsParams{Now: now, MaxRows: escalateBatch})
	if err != nil {
		return nil, fmt.Errorf("proposals: escalate approvals: %w", err)
	}
	ids := make([]uuid.UUID, len(rows))
	workspaces := map[uuid.UUID]bool{}
	for i, r := range rows {
		ids[i] = r.ID
		workspaces[r.WorkspaceID] = true
		data := map[string]any{"proposal_id": r.ProposalID, "from_role": r.ApproverRole, "to_role": r.EscalateTo.String}
		if r.EscalateAt != nil {
			data["after_minutes"] = int(r.EscalateAt.Sub(r.CreatedAt).Round(time.Minute) / time.Minute)
		}
		if err := audit.Record(ctx, q, auth.Principal{WorkspaceID: r.WorkspaceID}, r.WorkspaceID, "approval.escalated", "approval", r.ID.String(), data); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("proposals: commit escalation: %w", err)
	}
	for ws := range workspaces {
		s.announceApprovals(ws)
	}
	return ids, nil
}

// Reconcile settles packets and proposals that disagree, which a crash
// between two steps of an older version could leave behind (approving is
// one transaction now): an approved packet whose call never started fails
// the call (it is never run on its own); a rejected or expired packet's
// waiting call follows it; a packet still pending whose call was resolved
// otherwise follows the call. Each settlement is audited. The sweeper runs
// it; it returns how many pairs it settled.
func (s *Service) Reconcile(ctx context.Context) (int, error) {
	n := 0
	// Each settlement commits on its own (no transaction is open here); the
	// pages showing the call and its packet are told after it.
	settle := func(ws uuid.UUID, subjectType, subject, how string, data map[string]any, proposalID uuid.UUID) error {
		n++
		data["settled"] = how
		if err := audit.Record(ctx, s.q, auth.Principal{}, ws, "approval.reconciled", subjectType, subject, data); err != nil {
			return err
		}
		if prop, err := s.q.GetProposalInWorkspace(ctx, db.GetProposalInWorkspaceParams{ID: proposalID, WorkspaceID: ws}); err == nil {
			s.announce(prop, true)
		} else {
			s.announceApprovals(ws)
		}
		return nil
	}
	approved, err := s.q.ReconcileApprovedButNotRun(ctx)
	if err != nil {
		return n, fmt.Errorf("proposals: reconcile approved packets: %w", err)
	}
	for _, r := range approved {
		if err := settle(r.WorkspaceID, "proposal", r.ID.String(), "failed: approved but never started", map[string]any{"approval_id": r.ApprovalID}, r.ID); err != nil {
			return n, err
		}
		prop, err := s.q.GetProposalInWorkspace(ctx, db.GetProposalInWorkspaceParams{ID: r.ID, WorkspaceID: r.WorkspaceID})
		if err != nil {
			return n, fmt.Errorf("proposals: get reconciled proposal: %w", err)
		}
		if _, err := s.record(ctx, s.q, auth.Principal{WorkspaceID: r.WorkspaceID}, receipts.KindRefusal, outcomeReconciled, prop, prop.Error.String); err != nil {
			return n, err
		}
	}
	closed, err := s.q.ReconcileRejectedOrExpired(ctx)
	if err != nil {
		return n, fmt.Errorf("proposals: reconcile closed packets: %w", err)
	}
	for _, r := range closed {
		if err := settle(r.WorkspaceID, "proposal", r.ID.String(), r.ApprovalStatus+" like its packet", map[string]any{"approval_id": r.ApprovalID}, r.ID); err != nil {
			return n, err
		}
	}
	orphans, err := s.q.ReconcileOrphanedPackets(ctx)
	if err != nil {
		return n, fmt.Errorf("proposals: reconcile orphaned packets: %w", err)
	}
	for _, r := range orphans {
		if err := settle(r.WorkspaceID, "approval", r.ID.String(), "packet follows its call, which is "+r.ProposalStatus, map[string]any{"proposal_id": r.ProposalID}, r.ProposalID); err != nil {
			return n, err
		}
	}
	return n, nil
}

func approvalFrom(a db.Approval) Approval {
	var cs []policy.Constraint
	_ = json.Unmarshal(a.Constraints, &cs)
	return Approval{ID: a.ID, ProposalID: a.ProposalID, Summary: a.Summary, ApproverRole: a.ApproverRole,
		RequiresWitness: a.RequiresWitness, Status: a.Status, Constraints: cs, RejectionReason: a.RejectionReason.String,
		CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, ResolvedAt: a.ResolvedAt,
		Quorum: int(a.Quorum), EscalateTo: a.EscalateTo.String, EscalateAt: a.EscalateAt, EscalatedAt: a.EscalatedAt}
}

func scopeOfIDs(conv, nb uuid.NullUUID) Scope {
	if nb.Valid {
		return InNotebook(nb.UUID)
	}
	return InConversation(conv.UUID)
}

// OutboxItem is a message the built-in tools delivered to the workspace
// outbox (email) or recorded as delivered (webhook).
type OutboxItem struct {
	ID             int64
	Kind           string
	Recipient      string
	Subject        string
	Body           string
	ResponseStatus int
	CreatedAt      time.Time
}

// Outbox lists the workspace's outbox, newest first (approvers and admins).
func (s *Service) Outbox(ctx context.Context, p auth.Principal, limit int) ([]OutboxItem, error) {
	if err := canResolve(p, string(auth.RoleApprover)); err != nil {
		return nil, err
	}
	rows, err := s.q.ListOutbox(ctx, db.ListOutboxParams{WorkspaceID: p.WorkspaceID, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("proposals: outbox: %w", err)
	}
	out := make([]OutboxItem, len(rows))
	for i, r := range rows {
		out[i] = OutboxItem{ID: r.ID, Kind: r.Kind, Recipient: r.Recipient, Subject: r.Subject.String, Body: r.Body,
			ResponseStatus: int(r.ResponseStatus.Int32), CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// StuckAfter is how long a claim may run before it counts as stuck: the
// built-in tools finish in well under a second, webhooks within 10 s.
const StuckAfter = 5 * time.Minute

// Stuck lists proposals claimed but never finished (a crash between the
// claim and the result), for approvers to review. They are never re-run on
// their own: whether the tool took effect is a person's call.
func (s *Service) Stuck(ctx context.Context, p auth.Principal) ([]Proposal, error) {
	if err := mayOpenQueue(p); err != nil {
		return nil, err
	}
	if !p.CanApprove() {
		return nil, nil // holders of a named role alone see their packets, not the workspace's stuck calls
	}
	rows, err := s.q.ListStuckProposals(ctx, db.ListStuckProposalsParams{WorkspaceID: p.WorkspaceID, ClaimedAt: ptr(time.Now().Add(-StuckAfter))})
	if err != nil {
		return nil, fmt.Errorf("proposals: stuck: %w", err)
	}
	out := make([]Proposal, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Settle records what an admin found a stuck claim did: it ran (applied)
// or it did not (failed, with their note). Audited; the agent reads it.
func (s *Service) Settle(ctx context.Context, p auth.Principal, id uuid.UUID, ran bool, note string) (Proposal, error) {
	if p.IsAgent() || !p.IsAdmin() {
		return Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Only admins settle a stuck call.")
	}
	note = strings.TrimSpace(note)
	if n := utf8.RuneCountInString(note); n < 1 || n > 500 {
		return Proposal{}, apperr.Invalid("Say what you found (1 to 500 characters).", apperr.FieldError{Field: "note", Message: "must have 1 to 500 characters"})
	}
	status, errText := StatusApplied, pgtype.Text{}
	if !ran {
		status, errText = StatusFailed, pgtype.Text{String: "Did not run (settled after review): " + note, Valid: true}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	row, err := q.SettleStuckProposal(ctx, db.SettleStuckProposalParams{ID: id, WorkspaceID: p.WorkspaceID, Status: status, Error: errText,
		Cutoff: ptr(time.Now().Add(-StuckAfter))})
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, apperr.Errorf(apperr.ECONFLICT, "This call is not stuck (it finished, or it is still within %s of its claim).", StuckAfter)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: settle: %w", err)
	}
	keep := audit.DefaultRetention
	if tool, ok := s.toolOf(row.Tool, row.CallerDeclaration); ok {
		keep = tool.Contract.Retention
	}
	if err := audit.RecordRetained(ctx, q, p, p.WorkspaceID, keep, "proposal.settled", "proposal", id.String(),
		map[string]any{"ran": ran, "note": note, "tool": row.Tool}); err != nil {
		return Proposal{}, err
	}
	kind := receipts.KindExecution
	if !ran {
		kind = receipts.KindRefusal
	}
	if _, err := s.record(ctx, q, p, kind, outcomeSettled, row, note); err != nil {
		return Proposal{}, err
	}
	return s.committed(ctx, tx, row, "settlement")
}

func ptr[T any](v T) *T { return &v }
