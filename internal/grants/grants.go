// Package grants is "approve and allow similar for ...": a person who
// approves a call (the owner on a confirm card, an approver on a packet)
// may allow calls like it for a while, within bounds. A grant covers one
// tool or one action class, in one conversation or notebook or from one
// token, for 15 minutes to 24 hours and 1 to 100 calls, and never more
// than its grantor could approve themselves. The decision reads a scope's
// live grants with its row and the grant layer (internal/policy) lets a
// covered call through; internal/proposals takes each use off the grant
// in the call's transaction. This package creates, lists and revokes them.
package grants

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"
	"github.com/gatehouse/gatehouse/internal/cursor"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The bounds of every grant.
const (
	MinMinutes = 15
	MaxMinutes = 24 * 60
	MinCalls   = 1
	MaxCalls   = 100
)

// Scopes a grant applies in.
const (
	ScopeConversation = "conversation"
	ScopeNotebook     = "notebook"
	ScopeToken        = "token"
)

// Statuses of a grant, as people read them.
const (
	StatusActive  = "active"
	StatusUsedUp  = "used_up"
	StatusExpired = "expired"
	StatusRevoked = "revoked"
)

// Grant is a grant as people see it.
type Grant struct {
	ID uuid.UUID
	// OwnerID is whose calls it covers; GrantedBy who granted it.
	OwnerID, GrantedBy         uuid.UUID
	OwnerEmail, GrantedByEmail string
	// Scope is conversation, notebook or token, ScopeID its id.
	Scope   string
	ScopeID uuid.UUID
	// ScopeTitle is the conversation's or notebook's title, TokenName the
	// token's name (as listed).
	ScopeTitle, TokenName string
	// Exactly one of Tool and ActionClass.
	Tool, ActionClass string
	// Ceiling is review_required (the owner's grant) or deferred (an
	// approver's, for packets of ApproverRole).
	Ceiling, ApproverRole string
	Bounds                []policy.Constraint
	MaxCalls, Remaining   int
	CreatedAt, ExpiresAt  time.Time
	RevokedAt, LastUsedAt *time.Time
	// ProposalID is the call it came with; ApprovalID its packet.
	ProposalID, ApprovalID uuid.NullUUID
}

// Status is active, used_up, expired or revoked at now.
func (g Grant) Status(now time.Time) string {
	switch {
	case g.RevokedAt != nil:
		return StatusRevoked
	case !now.Before(g.ExpiresAt):
		return StatusExpired
	case g.Remaining <= 0:
		return StatusUsedUp
	}
	return StatusActive
}

// Subject names what the grant covers: "tool records.put" or "class
// tool.call.local".
func (g Grant) Subject() string {
	if g.Tool != "" {
		return "tool " + g.Tool
	}
	return "class " + g.ActionClass
}

// Request is a grant asked for over the API. Without ApprovalID it is the
// caller's own grant over one of their scopes or tokens (the owner's
// ceiling); with it, an approver's grant extending a packet they
// approved, for calls like its call in its scope or from its token.
type Request struct {
	Tool, ActionClass                   string
	ConversationID, NotebookID, TokenID uuid.NullUUID
	Bounds                              []policy.Constraint
	Minutes, Calls                      int
	ApprovalID                          uuid.NullUUID
}

// Choice is the "allow similar" part of an approve form on a card or a
// packet: For the call's tool or its class, Where its conversation or
// notebook ("here") or the token that proposed it ("token").
type Choice struct {
	For, Where     string
	Bounds         []policy.Constraint
	Minutes, Calls int
}

// Choices.
const (
	ForTool    = "tool"
	ForClass   = "class"
	WhereHere  = "here"
	WhereToken = "token"
)

// Anchor is the call a grant comes with, as it will run: the card or
// packet being approved.
type Anchor struct {
	ProposalID uuid.UUID
	ApprovalID uuid.NullUUID
	Tool       *tools.Tool
	// ActionClass is the class the call was decided as now.
	ActionClass                         string
	ConversationID, NotebookID, TokenID uuid.NullUUID
	OwnerID, ProposerID                 uuid.UUID
	// Ceiling is review_required for the owner's confirm, deferred for an
	// approval of a packet that waits for Role.
	Ceiling policy.State
	Role    string
	// Witness says the packet needs a second approver: no grant then.
	Witness bool
	// Facts are the call's, for its bounds.
	Facts policy.Facts
}

// Service creates, lists and revokes grants.
type Service struct {
	pool  *pgxpool.Pool
	q     *db.Queries
	tools *tools.Registry
	key   *cursor.Key // signs the list's cursors
}

// NewService returns the service.
func NewService(pool *pgxpool.Pool, registry *tools.Registry) *Service {
	q := db.New(pool)
	return &Service{pool: pool, q: q, tools: registry, key: cursor.NewKey(q)}
}

// ErrNotFound is a grant the caller may not see.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such grant.")

func invalid(field, msg string) error {
	return apperr.Invalid(fmt.Sprintf("The grant's %s %s; nothing was done.", field, msg), apperr.FieldError{Field: field, Message: msg})
}

func forbidden(field, msg string) error {
	return &apperr.Error{Code: apperr.EFORBIDDEN, Message: msg, Fields: []apperr.FieldError{{Field: field, Message: msg}}}
}

// checkRanges refuses a count or duration out of range, naming the field.
func checkRanges(minutes, calls int, minutesField, callsField string) error {
	var fields []apperr.FieldError
	if minutes < MinMinutes || minutes > MaxMinutes {
		fields = append(fields, apperr.FieldError{Field: minutesField, Message: fmt.Sprintf("must be from %d to %d minutes", MinMinutes, MaxMinutes)})
	}
	if calls < MinCalls || calls > MaxCalls {
		fields = append(fields, apperr.FieldError{Field: callsField, Message: fmt.Sprintf("must be from %d to %d calls", MinCalls, MaxCalls)})
	}
	if len(fields) > 0 {
		return apperr.Invalid(fmt.Sprintf("The grant's %s %s; nothing was done.", fields[0].Field, fields[0].Message), fields...)
	}
	return nil
}

// checkBounds refuses a bound of a kind a grant may not have, or a
// malformed one; field names each (bounds.0, or a form's field).
func checkBounds(bounds []policy.Constraint, field func(i int, c policy.Constraint) string) error {
	for i, b := range bounds {
		f := field(i, b)
		if !slices.Contains(policy.GrantBoundKinds, b.Kind) {
			return invalid(f, fmt.Sprintf("must be a bound of kind %s (not %q)", strings.Join(policy.GrantBoundKinds, ", "), clip.Ellipsis(b.Kind, 40)))
		}
		if err := b.Validate(); err != nil {
			return invalid(f, "cannot be read: "+strings.TrimPrefix(err.Error(), "policy: "))
		}
	}
	return nil
}

// Validate checks a form's choice before anything runs: the fields are
// the form's (grant_for, grant_scope, grant_minutes, grant_calls and
// grant_<bound kind>).
func (c Choice) Validate() error {
	if c.For != ForTool && c.For != ForClass {
		return invalid("grant_for", "must be tool or class")
	}
	if c.Where != WhereHere && c.Where != WhereToken {
		return invalid("grant_scope", "must be here or token")
	}
	if err := checkRanges(c.Minutes, c.Calls, "grant_minutes", "grant_calls"); err != nil {
		return err
	}
	return checkBounds(c.Bounds, func(_ int, b policy.Constraint) string { return "grant_" + b.Kind })
}

// validate checks a request's shape before anything is read.
func (r Request) validate() error {
	switch {
	case (r.Tool == "") == (r.ActionClass == ""):
		return invalid("tool", "or action_class must be given, one of them")
	case countValid(r.ConversationID, r.NotebookID, r.TokenID) != 1:
		return invalid("conversation_id", "or notebook_id or token_id must be given, one of them")
	}
	if err := checkRanges(r.Minutes, r.Calls, "duration_minutes", "max_calls"); err != nil {
		return err
	}
	return checkBounds(r.Bounds, func(i int, _ policy.Constraint) string { return fmt.Sprintf("bounds.%d", i) })
}

func countValid(ids ...uuid.NullUUID) int {
	n := 0
	for _, id := range ids {
		if id.Valid {
			n++
		}
	}
	return n
}

// grantRow is what one new grant writes, checked.
type grantRow struct {
	db.InsertGrantParams
	minutes int
}

// CreateWith creates the grant a person chose on the card or packet they
// approve, in the approval's transaction (q): for calls like the anchor
// call, never more than they could approve themselves. An error names
// the form's field, and the caller rolls everything back.
func (s *Service) CreateWith(ctx context.Context, q *db.Queries, p auth.Principal, a Anchor, c Choice) (Grant, error) {
	if p.IsAgent() {
		return Grant{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot grant anything.")
	}
	if err := c.Validate(); err != nil {
		return Grant{}, err
	}
	row := grantRow{minutes: c.Minutes}
	row.WorkspaceID, row.OwnerID, row.GrantedBy = p.WorkspaceID, a.OwnerID, p.UserID
	row.MaxCalls, row.Minutes = int32(c.Calls), int32(c.Minutes)
	row.ProposalID, row.ApprovalID = uuid.NullUUID{UUID: a.ProposalID, Valid: true}, a.ApprovalID
	if err := s.ceiling(p, a, &row.InsertGrantParams, "grant"); err != nil {
		return Grant{}, err
	}
	if why := policy.Ungrantable(a.Tool.Effect, a.Tool.Contract.Authority, a.ActionClass, s.tools.Classes()); why != "" {
		return Grant{}, invalid("grant_for", "cannot cover this call: "+why)
	}
	switch c.For {
	case ForTool:
		row.Tool = text(a.Tool.Name)
	default:
		if a.ActionClass == "" {
			return Grant{}, invalid("grant_for", "cannot be the class: the call has none")
		}
		if why := policy.UngrantableClass(a.ActionClass, s.tools.Classes()); why != "" {
			return Grant{}, invalid("grant_for", "cannot be the class: "+why)
		}
		row.ActionClass = text(a.ActionClass)
	}
	switch c.Where {
	case WhereToken:
		if !a.TokenID.Valid {
			return Grant{}, invalid("grant_scope", "cannot be the token: the call was not proposed with a token")
		}
		row.TokenID = a.TokenID
	default:
		row.ConversationID, row.NotebookID = a.ConversationID, a.NotebookID
	}
	if err := policy.GrantBoundsHold(c.Bounds, a.Facts); err != nil {
		var v *policy.Violation
		field := "grant_bounds"
		if errors.As(err, &v) {
			field = "grant_" + v.Constraint
		}
		return Grant{}, invalid(field, "must hold for the call you approve: "+err.Error())
	}
	return s.insert(ctx, q, p, row, c.Bounds)
}

// ceiling sets what the grant stands in for from the anchor's path: the
// owner's confirm grants only the owner's own calls; an approver's only
// packets of a role they may resolve, never their own calls, never where
// a witness is needed.
func (s *Service) ceiling(p auth.Principal, a Anchor, row *db.InsertGrantParams, field string) error {
	switch a.Ceiling {
	case policy.StateReviewRequired:
		if p.UserID != a.OwnerID {
			return forbidden(field, "Only the owner of the conversation or notebook grants calls its confirm card would ask them.")
		}
		row.Ceiling = string(policy.StateReviewRequired)
	case policy.StateDeferred:
		switch {
		case p.UserID == a.OwnerID || p.UserID == a.ProposerID:
			return forbidden(field, "Nobody grants their own calls what an approver must approve.")
		case !p.MayResolve(a.Role):
			return forbidden(field, fmt.Sprintf("A grant for packets of the %s role needs that role, which you do not hold.", a.Role))
		case a.Witness:
			return invalid(field, "cannot be given on a packet that needs a witness: a grant never stands in for a second approver")
		}
		row.Ceiling, row.ApproverRole = string(policy.StateDeferred), text(a.Role)
	default:
		return invalid(field, fmt.Sprintf("cannot be given for a call that is %s", a.Ceiling))
	}
	return nil
}

// Create creates a grant asked for over the API (see Request), in a
// transaction of its own.
func (s *Service) Create(ctx context.Context, p auth.Principal, r Request) (Grant, error) {
	if p.IsAgent() {
		return Grant{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot grant anything; a person does.")
	}
	if err := r.validate(); err != nil {
		return Grant{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	row := grantRow{minutes: r.Minutes}
	row.WorkspaceID, row.GrantedBy = p.WorkspaceID, p.UserID
	row.MaxCalls, row.Minutes = int32(r.Calls), int32(r.Minutes)
	row.ConversationID, row.NotebookID, row.TokenID = r.ConversationID, r.NotebookID, r.TokenID
	if r.ApprovalID.Valid {
		err = s.approverRequest(ctx, q, p, r, &row)
	} else {
		err = s.ownerRequest(ctx, q, p, r, &row)
	}
	if err != nil {
		return Grant{}, err
	}
	g, err := s.insert(ctx, q, p, row, r.Bounds)
	if err != nil {
		return Grant{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Grant{}, fmt.Errorf("grants: commit: %w", err)
	}
	return g, nil
}

// ownerRequest is the caller's own grant: over their own conversation,
// notebook or token, for what its confirm card would have asked them.
func (s *Service) ownerRequest(ctx context.Context, q *db.Queries, p auth.Principal, r Request, row *grantRow) error {
	row.OwnerID, row.Ceiling = p.UserID, string(policy.StateReviewRequired)
	var err error
	switch {
	case r.ConversationID.Valid:
		_, err = q.GetConversation(ctx, db.GetConversationParams{ID: r.ConversationID.UUID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("conversation_id", "No such conversation of yours.")
		}
	case r.NotebookID.Valid:
		_, err = q.GetNotebook(ctx, db.GetNotebookParams{ID: r.NotebookID.UUID, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("notebook_id", "No such notebook of yours.")
		}
	default:
		var t db.GetAPITokenRow
		t, err = q.GetAPIToken(ctx, r.TokenID.UUID)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && (t.WorkspaceID != p.WorkspaceID || t.UserID != p.UserID || t.RevokedAt != nil)) {
			return notFound("token_id", "No such token of yours.")
		}
	}
	if err != nil {
		return fmt.Errorf("grants: read scope: %w", err)
	}
	return s.subject(r, row)
}

// subject checks and sets what a request covers.
func (s *Service) subject(r Request, row *grantRow) error {
	if r.Tool != "" {
		tool, ok := s.tools.Get(r.Tool)
		if !ok {
			return invalid("tool", "is not a declared tool")
		}
		if why := policy.Ungrantable(tool.Effect, tool.Contract.Authority, tool.Contract.ActionClass, s.tools.Classes()); why != "" {
			return invalid("tool", "cannot be granted: "+why)
		}
		row.Tool = text(tool.Name)
		return nil
	}
	class, err := policy.CanonicalClass(r.ActionClass)
	if err != nil {
		return invalid("action_class", "is not an action class in dot notation")
	}
	if why := policy.UngrantableClass(class, s.tools.Classes()); why != "" {
		return invalid("action_class", "cannot be granted: "+why)
	}
	row.ActionClass = text(class)
	return nil
}

// approverRequest is an approver's grant extending a packet they
// approved: in its call's scope or from its token, for its tool or class.
func (s *Service) approverRequest(ctx context.Context, q *db.Queries, p auth.Principal, r Request, row *grantRow) error {
	a, err := q.GetApproval(ctx, db.GetApprovalParams{ID: r.ApprovalID.UUID, WorkspaceID: p.WorkspaceID})
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound("approval_id", "No such approval.")
	}
	if err != nil {
		return fmt.Errorf("grants: read approval: %w", err)
	}
	votes, err := q.ListApprovalVotes(ctx, db.ListApprovalVotesParams{WorkspaceID: p.WorkspaceID, ApprovalID: a.ID})
	if err != nil {
		return fmt.Errorf("grants: read votes: %w", err)
	}
	if a.Status != "approved" || !slices.ContainsFunc(votes, func(v db.ListApprovalVotesRow) bool { return v.UserID == p.UserID }) {
		return forbidden("approval_id", "A grant extends an approval you gave: you did not approve this packet.")
	}
	if !p.MayResolve(a.ApproverRole) {
		return forbidden("approval_id", fmt.Sprintf("A grant for packets of the %s role needs that role, which you do not hold.", a.ApproverRole))
	}
	if a.ApproverRole != string(auth.RoleApprover) && a.ApproverRole != string(auth.RoleAdmin) {
		held, err := q.HoldsApproverRole(ctx, db.HoldsApproverRoleParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Role: a.ApproverRole})
		if err != nil {
			return fmt.Errorf("grants: read approver role: %w", err)
		}
		if !held {
			return forbidden("approval_id", fmt.Sprintf("A grant for packets of the %s role needs that role, which you do not hold.", a.ApproverRole))
		}
	}
	prop, err := q.GetProposalInWorkspace(ctx, db.GetProposalInWorkspaceParams{ID: a.ProposalID, WorkspaceID: p.WorkspaceID})
	if err != nil {
		return fmt.Errorf("grants: read proposal: %w", err)
	}
	tool, ok := s.tools.Get(prop.Tool)
	if !ok {
		return invalid("approval_id", "is for a tool that is no longer declared")
	}
	class := prop.ActionClass.String
	if d := decision(prop.EffectDecision); d != nil && d.ActionClass != "" {
		class = d.ActionClass
	}
	anchor := Anchor{ProposalID: prop.ID, ApprovalID: r.ApprovalID, Tool: tool, ActionClass: class, ConversationID: prop.ConversationID,
		NotebookID: prop.NotebookID, TokenID: prop.ProposedByTokenID, OwnerID: prop.OwnerID, ProposerID: prop.ProposedByUserID,
		Ceiling: policy.StateDeferred, Role: a.ApproverRole, Witness: a.RequiresWitness}
	row.OwnerID, row.ProposalID, row.ApprovalID = prop.OwnerID, uuid.NullUUID{UUID: prop.ID, Valid: true}, r.ApprovalID
	if err := s.ceiling(p, anchor, &row.InsertGrantParams, "approval_id"); err != nil {
		return err
	}
	if why := policy.Ungrantable(tool.Effect, tool.Contract.Authority, class, s.tools.Classes()); why != "" {
		return invalid("approval_id", "is for a call no grant may cover: "+why)
	}
	switch {
	case r.ConversationID.Valid && r.ConversationID != prop.ConversationID:
		return invalid("conversation_id", "must be the conversation of the packet's call")
	case r.NotebookID.Valid && r.NotebookID != prop.NotebookID:
		return invalid("notebook_id", "must be the notebook of the packet's call")
	case r.TokenID.Valid && r.TokenID != prop.ProposedByTokenID:
		return invalid("token_id", "must be the token that proposed the packet's call")
	case r.Tool != "" && r.Tool != tool.Name:
		return invalid("tool", "must be the packet's tool, "+tool.Name)
	case r.ActionClass != "":
		c, err := policy.CanonicalClass(r.ActionClass)
		if err != nil || c != class {
			return invalid("action_class", "must be the packet's action class, "+class)
		}
	}
	return s.subject(r, row)
}

// insert writes the grant with its audit row and its receipt (a grant
// changes what runs without a person, like a setting).
func (s *Service) insert(ctx context.Context, q *db.Queries, p auth.Principal, row grantRow, bounds []policy.Constraint) (Grant, error) {
	if bounds == nil {
		bounds = []policy.Constraint{}
	}
	b, err := json.Marshal(bounds)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: encode bounds: %w", err)
	}
	row.Bounds = b
	r, err := q.InsertGrant(ctx, row.InsertGrantParams)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: insert: %w", err)
	}
	g, err := named(ctx, q, fromRow(r))
	if err != nil {
		return Grant{}, err
	}
	data := map[string]any{"scope": g.Scope, "scope_id": g.ScopeID, "owner_id": g.OwnerID, "ceiling": g.Ceiling,
		"max_calls": g.MaxCalls, "minutes": row.minutes, "expires_at": g.ExpiresAt, "bounds": bounds}
	if g.Tool != "" {
		data["tool"] = g.Tool
	} else {
		data["action_class"] = g.ActionClass
	}
	if g.ApproverRole != "" {
		data["approver_role"] = g.ApproverRole
	}
	if g.ProposalID.Valid {
		data["proposal_id"] = g.ProposalID.UUID
	}
	if g.ApprovalID.Valid {
		data["approval_id"] = g.ApprovalID.UUID
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "grant.created", "grant", g.ID.String(), data); err != nil {
		return Grant{}, err
	}
	data["grant_id"] = g.ID
	if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID,
		map[string]any{"setting": "grant", "new": data}, time.Now()); err != nil {
		return Grant{}, err
	}
	return g, nil
}

// ListFilter narrows the grants a person reads: those that apply in one
// conversation or notebook, every grant of the workspace (admins), only
// the live ones.
type ListFilter struct {
	ConversationID, NotebookID uuid.NullUUID
	All, LiveOnly              bool
	// Limit is the page's size (0: DefaultLimit; 1 to MaxLimit); Cursor
	// the previous page's next cursor ("": the first page).
	Limit  int
	Cursor string
}

// Page sizes of List.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// A list cursor is a place in one person's list with one filter, signed
// like every list's cursor (internal/cursor):
//
//	base64url( 'g' | created_at: 8 bytes | id: 16 bytes | tag: 12 bytes )
//
// tag = HMAC-SHA256(key, label | workspace | user | filter | 'g' | created
// at | id)[:12]: another person's cursor, another filter's, or an altered
// one is refused (422 naming cursor).
const (
	cursorLabel  = "gatehouse grants list cursor"
	cursorTagLen = 12
)

var cursorPrefix = []byte("g")

func (f ListFilter) bound(p auth.Principal) [][]byte {
	return [][]byte{[]byte(cursorLabel), p.WorkspaceID[:], p.UserID[:],
		[]byte(fmt.Sprintf("all=%t live=%t conv=%s nb=%s", f.All, f.LiveOnly, f.ConversationID.UUID, f.NotebookID.UUID))}
}

// List is a page of the grants the caller sees, newest first: those they
// gave and those over their calls, or every one for an admin who asks for
// all; next is the cursor of the page after it ("": none).
func (s *Service) List(ctx context.Context, p auth.Principal, f ListFilter) (list []Grant, next string, err error) {
	if f.All && !p.IsAdmin() {
		return nil, "", forbidden("all", "Only admins see every grant of the workspace.")
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	if limit < 1 || limit > MaxLimit {
		return nil, "", apperr.Invalid(fmt.Sprintf("The limit must be from 1 to %d.", MaxLimit),
			apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", MaxLimit)})
	}
	key, err := s.key.Get(ctx)
	if err != nil {
		return nil, "", err
	}
	params := db.ListGrantsParams{WorkspaceID: p.WorkspaceID, AllGrants: f.All, UserID: p.UserID,
		ConversationID: f.ConversationID, NotebookID: f.NotebookID, LiveOnly: f.LiveOnly, MaxRows: int32(limit + 1)}
	if f.Cursor != "" {
		at, id, ok := cursor.DecodePosition(key, cursorTagLen, cursorPrefix, f.Cursor, f.bound(p)...)
		if !ok {
			return nil, "", apperr.Invalid("The cursor is not one this list gave, or it was altered.",
				apperr.FieldError{Field: "cursor", Message: "is not this list's cursor"})
		}
		params.BeforeAt, params.BeforeID = &at, uuid.NullUUID{UUID: id, Valid: true}
	}
	rows, err := s.q.ListGrants(ctx, params)
	if err != nil {
		return nil, "", fmt.Errorf("grants: list: %w", err)
	}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = cursor.EncodePosition(key, cursorTagLen, cursorPrefix, last.CreatedAt, last.ID, f.bound(p)...)
	}
	out := make([]Grant, len(rows))
	for i, r := range rows {
		out[i] = fromRow(db.Grant{WorkspaceID: r.WorkspaceID, ID: r.ID, OwnerID: r.OwnerID, GrantedBy: r.GrantedBy, ConversationID: r.ConversationID,
			NotebookID: r.NotebookID, TokenID: r.TokenID, Tool: r.Tool, ActionClass: r.ActionClass, Ceiling: r.Ceiling, ApproverRole: r.ApproverRole,
			Bounds: r.Bounds, MaxCalls: r.MaxCalls, Remaining: r.Remaining, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt,
			RevokedBy: r.RevokedBy, LastUsedAt: r.LastUsedAt, ProposalID: r.ProposalID, ApprovalID: r.ApprovalID})
		out[i].GrantedByEmail, out[i].OwnerEmail, out[i].TokenName, out[i].ScopeTitle = r.GrantedByEmail, r.OwnerEmail, r.TokenName.String, r.ScopeTitle
	}
	return out, next, nil
}

// CountLive is how many live grants can apply in the caller's
// conversation or notebook (its own and their token grants).
func (s *Service) CountLive(ctx context.Context, p auth.Principal, conversationID, notebookID uuid.NullUUID) (int, error) {
	n, err := s.q.CountLiveGrants(ctx, db.CountLiveGrantsParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID,
		ConversationID: conversationID, NotebookID: notebookID})
	if err != nil {
		return 0, fmt.Errorf("grants: count: %w", err)
	}
	return int(n), nil
}

// Revoke ends a grant at once: the next decision, on any instance, reads
// it revoked. Its grantor, the owner of the calls it covers and admins
// may revoke it; agents never.
func (s *Service) Revoke(ctx context.Context, p auth.Principal, id uuid.UUID) (Grant, error) {
	if p.IsAgent() {
		return Grant{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot revoke grants; a person does.")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetGrantForUpdate(ctx, db.GetGrantForUpdateParams{WorkspaceID: p.WorkspaceID, ID: id})
	if errors.Is(err, pgx.ErrNoRows) {
		return Grant{}, ErrNotFound
	}
	if err != nil {
		return Grant{}, fmt.Errorf("grants: get: %w", err)
	}
	if cur.GrantedBy != p.UserID && cur.OwnerID != p.UserID && !p.IsAdmin() {
		return Grant{}, forbidden("id", "This grant is not yours to revoke: its grantor, the owner of its calls or an admin may.")
	}
	if cur.RevokedAt != nil {
		e := apperr.Errorf(apperr.ECONFLICT, "This grant was revoked already.")
		e.Extra = map[string]any{"grant_status": StatusRevoked}
		return Grant{}, e
	}
	r, err := q.RevokeGrant(ctx, db.RevokeGrantParams{WorkspaceID: p.WorkspaceID, ID: id, RevokedBy: uuid.NullUUID{UUID: p.UserID, Valid: true}})
	if err != nil {
		return Grant{}, fmt.Errorf("grants: revoke: %w", err)
	}
	g, err := named(ctx, q, fromRow(r))
	if err != nil {
		return Grant{}, err
	}
	data := map[string]any{"remaining": g.Remaining, "max_calls": g.MaxCalls, "scope": g.Scope, "scope_id": g.ScopeID}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "grant.revoked", "grant", id.String(), data); err != nil {
		return Grant{}, err
	}
	data["grant_id"] = id
	if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID,
		map[string]any{"setting": "grant", "old": data, "new": "revoked"}, time.Now()); err != nil {
		return Grant{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Grant{}, fmt.Errorf("grants: commit: %w", err)
	}
	return g, nil
}

// named fills in the emails of a grant's grantor and owner.
func named(ctx context.Context, q *db.Queries, g Grant) (Grant, error) {
	by, err := q.GetUser(ctx, g.GrantedBy)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: read grantor: %w", err)
	}
	owner, err := q.GetUser(ctx, g.OwnerID)
	if err != nil {
		return Grant{}, fmt.Errorf("grants: read owner: %w", err)
	}
	g.GrantedByEmail, g.OwnerEmail = by.Email, owner.Email
	return g, nil
}

func notFound(field, msg string) error {
	return &apperr.Error{Code: apperr.ENOTFOUND, Message: msg, Fields: []apperr.FieldError{{Field: field, Message: "is not found"}}}
}

func text(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func decision(raw []byte) *policy.Decision {
	if len(raw) == 0 {
		return nil
	}
	var d policy.Decision
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return &d
}

func fromRow(r db.Grant) Grant {
	g := Grant{ID: r.ID, OwnerID: r.OwnerID, GrantedBy: r.GrantedBy, Tool: r.Tool.String, ActionClass: r.ActionClass.String,
		Ceiling: r.Ceiling, ApproverRole: r.ApproverRole.String, MaxCalls: int(r.MaxCalls), Remaining: int(r.Remaining),
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt,
		ProposalID: r.ProposalID, ApprovalID: r.ApprovalID}
	_ = json.Unmarshal(r.Bounds, &g.Bounds)
	switch {
	case r.ConversationID.Valid:
		g.Scope, g.ScopeID = ScopeConversation, r.ConversationID.UUID
	case r.NotebookID.Valid:
		g.Scope, g.ScopeID = ScopeNotebook, r.NotebookID.UUID
	default:
		g.Scope, g.ScopeID = ScopeToken, r.TokenID.UUID
	}
	return g
}
