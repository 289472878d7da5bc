// Package proposals owns a tool call's life: Propose validates, decides and
// records it. Every path to effect (automatic, the owner's confirm, an
// approver's packet) claims the call exactly once and runs it through the
// same execute, which records the result and the same audit rows.
package proposals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/cursor"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/grants"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/ratelimit"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Statuses of a proposal.
const (
	StatusPending = "pending"
	// StatusPendingApproval waits for an approver (a deferred decision).
	StatusPendingApproval = "pending_approval"
	StatusApplying        = "applying"
	StatusApplied         = "applied"
	StatusRejected        = "rejected"
	// StatusExpired is a deferred call nobody approved in time.
	StatusExpired = "expired"
	StatusFailed  = "failed"
)

// Apply paths, recorded on the proposal and in its audit row.
const (
	PathAuto  = "auto"
	PathHuman = "human"
	// PathPerformed is the principal recording that they performed a
	// human-only action themselves; it is stored as the human path.
	PathPerformed = "performed"
	// PathApproval is an approver resolving an approval packet.
	PathApproval = "approval"
)

// ScopeKind names the two scopes a call can be proposed in.
type ScopeKind string

// Scope kinds.
const (
	ScopeConversation ScopeKind = "conversation"
	ScopeNotebook     ScopeKind = "notebook"
)

// Scope is where a call is proposed; its row's setting (the conversation's
// permission mode, the notebook's trust level) decides the call.
type Scope struct {
	Kind ScopeKind
	ID   uuid.UUID
}

// InConversation is the conversation scope.
func InConversation(id uuid.UUID) Scope { return Scope{Kind: ScopeConversation, ID: id} }

// InNotebook is the notebook scope.
func InNotebook(id uuid.UUID) Scope { return Scope{Kind: ScopeNotebook, ID: id} }

// Proposal is a proposed tool call (in a notebook: a cell) and what became
// of it.
type Proposal struct {
	ID               uuid.UUID
	Scope            Scope
	Tool             string
	Effect           policy.Effect
	Arguments        json.RawMessage
	AppliedArguments json.RawMessage // set when the owner edited before applying
	Rationale        string
	// PermissionMode (conversations) or TrustLevel (notebooks) is the
	// setting the call was decided under.
	PermissionMode policy.PermissionMode
	TrustLevel     policy.TrustLevel
	// Disposition is the scope gate's verdict: auto-run, auto-apply or
	// propose in a conversation; auto, confirm or gated in a notebook.
	Disposition string
	// The contract facts and the layered decision the call was taken on.
	Authority   policy.Authority
	Risk        policy.Risk
	ActionClass string
	Decision    *policy.Decision
	// EffectDecision is the decision taken again at the moment of effect,
	// on what was to run: the one that counted (nil until then).
	EffectDecision *policy.Decision
	DryRun         bool
	// Packet is the approval packet of a deferred call.
	Packet          *Packet
	Status          string
	Result          json.RawMessage
	Error           string
	RejectionReason string
	ApplyPath       string
	ProposedBy      string // "agent" or "user"
	// ProposedByUserID is the user the call was made for (the token's
	// owner), ProposedByTokenID the agent token that made it (if any) and
	// ResolvedByUserID who approved, ran or rejected it.
	ProposedByUserID  uuid.UUID
	ProposedByTokenID uuid.NullUUID
	ResolvedByUserID  uuid.NullUUID
	// ConfirmIgnored says why a caller's confirm: true granted nothing.
	ConfirmIgnored string
	// RationaleWarning says that a missing or short rationale was accepted
	// because the workspace is in warn mode, and until when.
	RationaleWarning string
	CreatedAt        time.Time
	ClaimedAt        *time.Time
	ResolvedAt       *time.Time
	// Ticket lets the proposing caller run a caller-executed call that
	// may run (applying), until it expires (nil otherwise; caller.go).
	Ticket *Ticket
	// Declaration is the tool as its caller declared it with the call
	// (nil for a tool the registry declares; caller.go), kept as
	// declaration.
	Declaration *tools.CallerDeclaration
	declaration []byte
}

// Packet is what a proposal shows of its approval packet.
type Packet struct {
	ID           uuid.UUID
	Summary      string
	Status       string
	ExpiresAt    time.Time
	ApproverRole string
	// Needed is how many distinct approvers it needs.
	Needed int
	// EscalatedTo is the role it was escalated to while waiting, and
	// when ("" and nil: not escalated).
	EscalatedTo string
	EscalatedAt *time.Time
}

// packetOf is what a proposal shows of its packet a.
func packetOf(a db.Approval) *Packet {
	out := &Packet{ID: a.ID, Summary: a.Summary, Status: a.Status, ExpiresAt: a.ExpiresAt, ApproverRole: a.ApproverRole,
		Needed: needed(int(a.Quorum), a.RequiresWitness)}
	if a.EscalatedAt != nil {
		out.EscalatedTo, out.EscalatedAt = a.EscalateTo.String, a.EscalatedAt
	}
	return out
}

// Input is a proposed call as the caller sent it.
type Input struct {
	Tool      string
	Arguments json.RawMessage
	Rationale string
	// IdempotencyKey is required by write-non-idempotent and irreversible
	// tools (the caller holds it with BeginIdempotent).
	IdempotencyKey string
	// Idem is the held key, if any: Propose links it to the proposal in the
	// proposal's transaction.
	Idem *Idem
	// Confirm is ADR-036's confirm: true. From a user acting on their own
	// scope it stands in for the owner's confirm card; it never replaces an
	// approver, a witness or the principal, and from an agent it grants
	// nothing (see ConfirmIgnored).
	Confirm bool
	// Declaration declares the caller's own tool with the call (the tool
	// is then the declared one: caller.go, callTool).
	Declaration *tools.CallerDeclaration
}

// Service is the propose → apply service.
type Service struct {
	pool      *pgxpool.Pool
	q         *db.Queries
	tools     *tools.Registry
	log       *slog.Logger
	idemWait  time.Duration
	idemLease time.Duration
	env       string
	// announcer tells live pages what changed, after each commit (nil:
	// nobody is told, as in tests that need no live pages).
	announcer events.Announcer
	// group lets automatic calls share a transaction, and outside the
	// records of outside reads share a statement (nil: off).
	group   *group
	outside *batcher[*outsideRecord]
	// cursorKey signs the approvals queue's cursors.
	cursorKey *cursor.Key
	// grantsSvc creates the grants chosen with an approval (grants.go).
	grantsSvc *grants.Service
	// limiter counts the limits of reads and idempotent writes
	// (ratelimit.go).
	limiter *ratelimit.Shared
}

// NewService returns the service.
func NewService(pool *pgxpool.Pool, registry *tools.Registry, log *slog.Logger) *Service {
	q := db.New(pool)
	s := &Service{pool: pool, q: q, tools: registry, log: log, idemWait: 5 * time.Second, idemLease: DefaultIdempotencyLease, env: "production",
		cursorKey: cursor.NewKey(q), grantsSvc: grants.NewService(pool, registry), limiter: ratelimit.New(q, log)}
	s.SetGroupCommit(DefaultGroupWriters(pool.Config().MaxConns))
	return s
}

// SetIdempotencyWait sets how long a request waits for another holding the
// same idempotency key before it answers 409.
func (s *Service) SetIdempotencyWait(d time.Duration) { s.idemWait = d }

// SetIdempotencyLease sets how long a key whose request died in flight keeps
// answering 409 before a retry gets the proposal's real state.
func (s *Service) SetIdempotencyLease(d time.Duration) { s.idemLease = d }

// SetAnnouncer sets what the service tells about changes after they
// commit: the events bus that live pages follow.
func (s *Service) SetAnnouncer(a events.Announcer) { s.announcer = a }

// announce tells the pages that show a proposal that it changed, after
// its transaction committed: its conversation or notebook, what waits for
// its owner (and for its proposer, whose agents' outcomes it is), and, for
// a call with an approval packet, the approvals queues.
func (s *Service) announce(row db.Proposal, packet bool) {
	if s.announcer == nil {
		return
	}
	ws := row.WorkspaceID
	switch {
	case row.ConversationID.Valid:
		s.announcer.Announce(ws, events.Conversation(row.ConversationID.UUID))
	case row.NotebookID.Valid:
		s.announcer.Announce(ws, events.Notebook(row.NotebookID.UUID))
	}
	s.announcer.Announce(ws, events.User(row.OwnerID))
	if row.ProposedByUserID != row.OwnerID && row.ProposedByUserID != uuid.Nil {
		s.announcer.Announce(ws, events.User(row.ProposedByUserID))
	}
	if packet {
		s.announceApprovals(ws)
	}
}

// announceApprovals tells the workspace's queues (and approvers' homes)
// that its packets changed.
func (s *Service) announceApprovals(ws uuid.UUID) {
	if s.announcer != nil {
		s.announcer.Announce(ws, events.TopicApprovals)
	}
}

// SetEnvironment names the deployment ("production", "staging") for the
// staging_only constraint.
func (s *Service) SetEnvironment(env string) { s.env = env }

func unknownTool(name string) error {
	return &apperr.Error{Code: apperr.ENOTFOUND, Message: fmt.Sprintf("No tool is named %q.", name),
		Fields: []apperr.FieldError{{Field: "tool", Message: "unknown tool"}}}
}

// missingIdempotencyKey refuses a call of a tool that needs a key without one.
func missingIdempotencyKey(tool *tools.Tool) error {
	return &apperr.Error{Code: apperr.EBADREQ,
		Message: fmt.Sprintf("%s is %s: send an Idempotency-Key header (or idempotency_key), so a retry cannot run it twice.", tool.Name, tool.Contract.Authority),
		Fields:  []apperr.FieldError{{Field: "idempotency_key", Message: "is required for this tool"}}}
}

// audit writes an audit row kept as long as the tool's contract says.
func (s *Service) audit(ctx context.Context, q *db.Queries, p auth.Principal, tool *tools.Tool, action, subjectType, subjectID string, data map[string]any) error {
	return audit.RecordRetained(ctx, q, p, p.WorkspaceID, tool.Contract.Retention, action, subjectType, subjectID, data)
}

// ErrNotFound is what a caller gets for a proposal that is not theirs.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such proposal.")

// Propose validates a call, decides it in layers from its scope's setting
// and the tool's contract (rows read now, never cached), records it with
// its audit row, and applies it at once when the decision allows. A call
// nobody may run (human_only, blocked) or that breaks a constraint is
// refused with 403 and leaves only an audit row.
//
// Automatic calls that arrive together may share one transaction (see
// group.go); each is decided, run and recorded exactly as it would be
// alone.
func (s *Service) Propose(ctx context.Context, p auth.Principal, scope Scope, in Input) (Proposal, error) {
	c, err := s.check(in)
	if err != nil {
		return Proposal{}, err
	}
	if s.group != nil && groupable(c, in) {
		if out, err, done := s.group.propose(ctx, p, scope, &c, in); done {
			return out, err
		}
	}
	return s.proposeAlone(ctx, p, scope, c, in)
}

// checked is a call that passed the checks made before anything is read:
// its tool, its compacted and validated arguments and its rationale.
type checked struct {
	tool       *tools.Tool
	args       json.RawMessage
	rationale  string
	nRationale int
	// short is a rationale under the floor of 10, refused unless the
	// workspace is in warn mode, which only the decision's row says.
	short bool
	// counted says the call's limit per agent was counted in memory
	// already: by a group transaction that then left it to run alone.
	counted bool
	// declaration is the tool's declaration sent with the call, as it is
	// kept with it (nil for a tool the registry declares).
	declaration json.RawMessage
}

var rationaleErr = apperr.FieldError{Field: "rationale", Message: "must have 10 to 500 characters"}

// check validates what the caller sent.
func (s *Service) check(in Input) (checked, error) {
	tool, declaration, err := s.callTool(in)
	if err != nil {
		return checked{}, err
	}
	var fields []apperr.FieldError
	rationale := strings.TrimSpace(in.Rationale)
	// A rationale under the floor of 10 is refused here unless the
	// workspace is in warn mode, which the decision's row says: alone, its
	// refusal waits for that row (refused as before if it cannot be read).
	nRationale := utf8.RuneCountInString(rationale)
	short := nRationale < 10
	if nRationale > 500 {
		fields = append(fields, rationaleErr)
	}
	args, err := compact(in.Arguments)
	if err == nil {
		err = tool.ValidateArguments(args)
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		fields = append(fields, ae.Fields...)
	} else if err != nil {
		return checked{}, err
	}
	if short && len(fields) > 0 {
		fields = append([]apperr.FieldError{rationaleErr}, fields...)
	}
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Field
		}
		return checked{}, apperr.Invalid("Invalid fields: "+strings.Join(names, ", ")+".", fields...)
	}
	if tool.Contract.Idempotency.Required && in.IdempotencyKey == "" && !short {
		return checked{}, missingIdempotencyKey(tool)
	}
	return checked{tool: tool, args: args, rationale: rationale, nRationale: nRationale, short: short, declaration: declaration}, nil
}

// rationaleVerdict is what the workspace's rationale rule says of the
// call: nothing, a warning (a missing or short rationale accepted in warn
// mode), or the refusal.
func rationaleVerdict(c checked, d decision, now time.Time) (warning string, err error) {
	if c.nRationale >= d.rationaleMin {
		return "", nil
	}
	switch {
	case d.rationaleWarnUntil != nil && now.Before(*d.rationaleWarnUntil):
		return "rationale missing or short; accepted until " + d.rationaleWarnUntil.UTC().Format(time.RFC3339), nil
	case c.short:
		return "", apperr.Invalid("Invalid fields: rationale.", rationaleErr)
	default:
		msg := fmt.Sprintf("must have at least %d characters in this workspace", d.rationaleMin)
		return "", apperr.Invalid("The rationale is too short: "+msg+".", apperr.FieldError{Field: "rationale", Message: msg})
	}
}

// warnRationale logs a rationale accepted with a warning.
func (s *Service) warnRationale(p auth.Principal, c checked, d decision) {
	s.log.Warn("rationale missing or short, accepted in warn mode", "token", p.TokenName, "user_id", p.UserID, "tool", c.tool.Name,
		"rationale_length", c.nRationale, "until", d.rationaleWarnUntil.UTC())
}

// createdData is the data of a call's proposal.created (or
// proposal.refused) audit row. Every call's audit row carries its
// rationale, refused ones too, so an agent's intent can be read from the
// audit log alone (ADR-036).
func createdData(c checked, d decision, scope Scope, warning string) map[string]any {
	data := map[string]any{"tool": c.tool.Name, "effect": c.tool.Effect, "disposition": d.scope.disposition,
		"state": d.State, "action_class": d.class, "scope": scope.Kind, "scope_id": scope.ID, "rationale": c.rationale}
	if warning != "" {
		// Counted on the intent view.
		data["rationale_warning"] = true
	}
	if d.Grant != nil {
		data["grant_id"] = d.Grant.ID
	}
	if d.shadow != nil {
		data["shadow"] = d.shadow // in the call's own audit row: no statement more
	}
	if c.declaration != nil {
		// What the caller declared, for whoever reads the call.
		data["declaration"] = json.RawMessage(c.declaration)
	}
	return data
}

// proposalParams is the proposal row of a decided call, in the status
// its outcome gives it.
func proposalParams(p auth.Principal, scope Scope, c checked, d decision, status string, confirmed bool) (db.InsertProposalParams, error) {
	decisionJSON, err := json.Marshal(d.Decision)
	if err != nil {
		return db.InsertProposalParams{}, fmt.Errorf("proposals: encode decision: %w", err)
	}
	constraintsJSON, err := json.Marshal(d.constraints)
	if err != nil {
		return db.InsertProposalParams{}, fmt.Errorf("proposals: encode constraints: %w", err)
	}
	callJSON, err := json.Marshal(d.call)
	if err != nil {
		return db.InsertProposalParams{}, fmt.Errorf("proposals: encode decision input: %w", err)
	}
	kind := "user"
	if p.IsAgent() {
		kind = "agent"
	}
	tool := c.tool
	params := db.InsertProposalParams{
		WorkspaceID: p.WorkspaceID, OwnerID: p.UserID, ProposedByUserID: p.UserID,
		ProposedByTokenID: nullUUID(p.TokenID), ProposedByKind: kind,
		Tool: tool.Name, Effect: string(tool.Effect), Arguments: c.args, Rationale: c.rationale,
		PermissionMode: nullText(string(d.scope.mode)), TrustLevel: nullText(string(d.scope.trust)), Disposition: d.scope.disposition,
		Authority: nullText(string(tool.Contract.Authority)), Risk: nullText(string(tool.Contract.Risk)), ActionClass: nullText(d.class),
		State: nullText(string(d.State)), Decision: decisionJSON, Constraints: constraintsJSON, Status: status, DecisionInput: callJSON,
		CallerDeclaration: c.declaration,
	}
	if status == StatusApplying {
		params.ApplyPath, params.ResolvedByUserID, params.EffectDecision = nullText(PathAuto), nullUUID(p.UserID), decisionJSON
		if confirmed {
			params.ApplyPath = nullText(PathHuman)
		}
	}
	switch scope.Kind {
	case ScopeConversation:
		params.ConversationID = nullUUID(scope.ID)
	case ScopeNotebook:
		params.NotebookID = nullUUID(scope.ID)
	}
	return params, nil
}

// proposeAlone is a call in a transaction of its own.
func (s *Service) proposeAlone(ctx context.Context, p auth.Principal, scope Scope, c checked, in Input) (Proposal, error) {
	tool, args, rationale := c.tool, c.args, c.rationale
	// The transaction begins in the round trip that reads the rows the
	// decision is taken on.
	tx, rows, err := s.beginDeciding(ctx, p, scope, tool)
	if tx != nil {
		defer tx.Rollback(ctx)
	}
	var d decision
	if err == nil {
		rows.confirm = in.Confirm
		d, err = s.decideOn(rows, p, scope, tool, args)
	}
	q := s.q.WithTx(tx)
	if err != nil && c.short {
		return Proposal{}, apperr.Invalid("Invalid fields: rationale.", rationaleErr)
	}
	if err != nil {
		return Proposal{}, err
	}
	warning, err := rationaleVerdict(c, d, time.Now())
	if err != nil {
		return Proposal{}, err
	}
	if warning != "" {
		s.warnRationale(p, c, d)
	}
	if tool.Contract.Idempotency.Required && in.IdempotencyKey == "" {
		// Left until here only for a short rationale accepted in warn mode.
		return Proposal{}, missingIdempotencyKey(tool)
	}
	auditData := createdData(c, d, scope, warning)
	refuse := func(err error, outcome string, why map[string]any) (Proposal, error) {
		for k, v := range why {
			auditData[k] = v
		}
		if aerr := s.audit(ctx, q, p, tool, "proposal.refused", "tool", tool.Name, auditData); aerr != nil {
			return Proposal{}, aerr
		}
		if rerr := s.refusedCall(ctx, q, p, outcome, tool.Name, args, rationale, d, apperr.Message(err)); rerr != nil {
			return Proposal{}, rerr
		}
		if cerr := tx.Commit(ctx); cerr != nil {
			return Proposal{}, fmt.Errorf("proposals: commit refusal: %w", cerr)
		}
		return Proposal{}, err
	}
	if d.State == policy.StateBlocked {
		return refuse(refusal(d, uuid.Nil), outcomeBlocked, map[string]any{"layers": d.Layers})
	}
	if err := s.checkConstraints(ctx, q, p, tool, args, d, nil, nil); err != nil {
		return refuse(err, outcomeConstraint, map[string]any{"constraint": apperr.Message(err)})
	}
	if err := s.countRate(ctx, q, p, tool, c.counted, time.Now()); err != nil {
		if apperr.Code(err) != apperr.ERATELIMIT {
			return Proposal{}, err
		}
		// Not counted: the refusal is recorded outside the transaction that
		// counted it.
		tx.Rollback(ctx)
		auditData["refused"] = "rate_limited"
		if aerr := s.audit(ctx, s.q, p, tool, "proposal.refused", "tool", tool.Name, auditData); aerr != nil {
			return Proposal{}, aerr
		}
		return Proposal{}, err
	}
	if d.Grant != nil {
		// A grant allows it: one call is taken off the grant here, or, if
		// it was used up meanwhile, the call waits for a person as before.
		if d, err = s.useGrant(ctx, q, p, scope, c, rows, d); err != nil {
			return Proposal{}, err
		}
		auditData = createdData(c, d, scope, warning)
	}
	// The automatic path's decision is its effect-time decision: taken in
	// this transaction, from the rows as they are now.
	outcome := policy.AtEffect(policy.PathAuto, d.State, d.State)
	confirmed, ignored := confirmByOwner(p, in.Confirm, outcome, d.State)
	if d.call.ConfirmedHighRisk {
		// The confirm stood in for the approver of a high-risk call (the
		// workspace's opt-in): said so in the audit row and the risk layer.
		auditData["confirmed_high_risk"] = true
		if outcome == policy.OutcomeRun || p.IsAgent() {
			ignored = ""
		}
	} else if ignored != "" && in.Confirm && tool.Contract.Risk == policy.RiskHigh && !rows.ws.ConfirmRunsHighRisk {
		ignored += " (This workspace does not let confirm: true stand in for the approver of a high-risk call: an admin may allow it, confirm_runs_high_risk on /admin/settings.)"
	}
	if confirmed {
		// The owner's own confirm, sent with the call: what the owner's
		// Apply would run now, it runs now, audited as such.
		outcome = policy.OutcomeRun
		auditData["confirmed_by_owner"] = true
	}
	status := StatusPending
	switch outcome {
	case policy.OutcomeEscalate:
		status = StatusPendingApproval
	case policy.OutcomeRun:
		// The automatic path claims the call as it records it.
		status = StatusApplying
	}
	params, err := proposalParams(p, scope, c, d, status, confirmed)
	if err != nil {
		return Proposal{}, err
	}
	if outcome == policy.OutcomeRun && !confirmed && ((!tool.Outside() && !tool.Caller) || policy.DryRun(d.constraints)) {
		// The automatic path of a tool whose effect is in this database:
		// run it, then record everything in one statement, one transaction.
		out, err := s.runAuto(ctx, tx, q, p, params, tool, args, d, auditData, in.Idem)
		out.ConfirmIgnored = ignored
		out.RationaleWarning = warning
		return out, err
	}
	if outcome == policy.OutcomeRun && !confirmed && tool.Outside() && tool.Contract.Authority == policy.AuthorityRead {
		// An outside tool's read (an upstream's): called, then recorded
		// in one statement, with no claim in between.
		out, err := s.readOutside(ctx, tx, p, params, tool, args, d, auditData, in.Idem)
		out.ConfirmIgnored = ignored
		out.RationaleWarning = warning
		return out, err
	}
	row, err := q.InsertProposal(ctx, params)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: insert: %w", err)
	}
	if err := in.Idem.link(ctx, q, row.ID); err != nil {
		return Proposal{}, err
	}
	var packet *Packet
	if status == StatusPendingApproval {
		a, err := s.openPacket(ctx, q, p, tool, row.ID, args, d.constraints)
		if err != nil {
			return Proposal{}, err
		}
		packet = packetOf(a)
		auditData["approval_id"] = a.ID
	}
	if err := s.audit(ctx, q, p, tool, "proposal.created", "proposal", row.ID.String(), auditData); err != nil {
		return Proposal{}, err
	}
	if d.State == policy.StateHumanOnly {
		// Refused to the agent; the prepared action waits for the principal.
		if _, err := s.record(ctx, q, p, receipts.KindRefusal, outcomeHumanOnly, row, "Only the principal can perform this action."); err != nil {
			return Proposal{}, err
		}
	}
	if outcome == policy.OutcomeRun {
		// In-database tools run here and commit with the record: done, or
		// not started. Outside tools commit the claim, then run.
		path := autoPath(d)
		if confirmed {
			path = PathHuman
		}
		out, err := s.run(ctx, tx, q, p, row, tool, args, d.ws, path, d.constraints)
		out.ConfirmIgnored = ignored
		out.RationaleWarning = warning
		return out, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, unknownOutcome(row.ID, fmt.Errorf("proposals: commit: %w", err))
	}
	s.announce(row, packet != nil)
	if d.State == policy.StateHumanOnly {
		// The prepared action waits for the principal, who performs it
		// themselves and records that they did (Perform); the agent is told
		// it cannot run it.
		return fromRow(row), refusal(d, row.ID)
	}
	out := fromRow(row)
	out.Packet = packet
	out.ConfirmIgnored = ignored
	out.RationaleWarning = warning
	return out, nil
}

// confirmByOwner decides what a call's confirm: true does (ADR-036): from a
// user (never an agent) proposing in their own scope — Propose only reads
// scopes the caller owns — it confirms a call that waits only for the
// owner's confirm card, exactly as the owner's Apply would run it now. It
// never stands in for an approver, a witness or the principal. ignored says
// why a confirm granted nothing.
func confirmByOwner(p auth.Principal, confirm bool, outcome policy.Outcome, state policy.State) (confirmed bool, ignored string) {
	switch {
	case !confirm:
		return false, ""
	case p.IsAgent():
		return false, "confirm: true from an agent token grants nothing; the scope's owner confirms."
	case outcome == policy.OutcomeRun:
		return false, "" // nothing to confirm: it runs anyway
	case outcome == policy.OutcomeConfirm && policy.AtEffect(policy.PathOwner, state, state) == policy.OutcomeRun:
		return true, ""
	}
	return false, fmt.Sprintf("confirm: true stands in only for the owner's confirm card; this call is %s and waits for an approver or the principal.", state)
}

// Apply is the owner applying a pending proposal, optionally with edited
// arguments (re-validated against the tool's schema).
func (s *Service) Apply(ctx context.Context, p auth.Principal, id uuid.UUID, edited json.RawMessage) (Proposal, error) {
	if p.IsAgent() {
		return Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot approve proposals; the owner of the conversation or notebook does.")
	}
	return s.apply(ctx, p, id, edited, policy.PathOwner, nil)
}

// Perform records that the owner performed a human-only action (a payment)
// themselves: the tool records it, once. Nobody else, and no agent, can.
func (s *Service) Perform(ctx context.Context, p auth.Principal, id uuid.UUID) (Proposal, error) {
	if p.IsAgent() {
		return Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Only the principal can record that they performed this action.")
	}
	cur, err := s.Get(ctx, p, id)
	if err != nil {
		return Proposal{}, err
	}
	if cur.Decision == nil || cur.Decision.State != policy.StateHumanOnly {
		return Proposal{}, apperr.Errorf(apperr.ECONFLICT, "This is not a human-only action; approve or reject it instead.")
	}
	return s.apply(ctx, p, id, nil, policy.PathPerformed, nil)
}

// apply is the path to effect of the owner's confirm (Apply, Run) and of
// the principal's own performance: in one transaction it locks the
// proposal, decides the call again on what will run (policy.AtEffect), and
// then runs it (claim, execute, record), opens an approval packet for it
// when it now needs an approver, or refuses it with the new decision. See
// effect.go. With a grant chosen (ApplyAndGrant), the grant is created
// with the claim, in the same transaction.
func (s *Service) apply(ctx context.Context, p auth.Principal, id uuid.UUID, edited json.RawMessage, path policy.Path, grant *grants.Choice) (Proposal, error) {
	tx, begin, err := s.beginCall(ctx)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	// BEGIN travels with the read that locks the proposal.
	cur, err := db.New(begin).GetProposalForUpdate(ctx, db.GetProposalForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	q := s.q.WithTx(tx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, ErrNotFound
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: get: %w", err)
	}
	if cur.Status != StatusPending {
		tx.Rollback(ctx)
		return Proposal{}, s.notPending(ctx, p, id)
	}
	ec, err := s.atEffect(ctx, q, p, cur, edited, path)
	if err != nil {
		return Proposal{}, err
	}
	if grant != nil && ec.outcome == policy.OutcomeEscalate {
		return Proposal{}, grantNeedsApprover(ec)
	}
	switch ec.outcome {
	case policy.OutcomeRun:
	case policy.OutcomeEscalate:
		return s.escalate(ctx, tx, q, p, ec)
	default:
		return s.refuseAtEffect(ctx, tx, q, p, ec, path, aboveCeiling(ec, path))
	}
	cs := allConstraints(ec.d, ec.stored)
	if err := s.checkConstraints(ctx, q, p, ec.tool, ec.args, ec.d, ec.stored, nil); err != nil {
		if apperr.Code(err) != apperr.EFORBIDDEN {
			return Proposal{}, err
		}
		return s.refuseAtEffect(ctx, tx, q, p, ec, path, err)
	}
	claimed, err := s.claim(ctx, tx, q, p, ec, path)
	if err != nil {
		return Proposal{}, err
	}
	if grant != nil {
		if err := s.grantWith(ctx, q, p, ec, policy.StateReviewRequired, uuid.NullUUID{}, "", false, *grant); err != nil {
			return Proposal{}, err
		}
	}
	return s.run(ctx, tx, q, p, claimed, ec.tool, ec.args, ec.d.ws, auditPath(path), cs)
}

// auditPath names a path in audit rows, as before paths had a type: the
// owner's confirm is "human".
func auditPath(path policy.Path) string {
	if path == policy.PathOwner {
		return PathHuman
	}
	return string(path)
}

// notPending explains why a proposal could not be claimed or rejected.
func (s *Service) notPending(ctx context.Context, p auth.Principal, id uuid.UUID) error {
	cur, err := s.Get(ctx, p, id)
	if err != nil {
		return err
	}
	e := apperr.Errorf(apperr.ECONFLICT, "This proposal was %s already.", cur.Status)
	if cur.Status == StatusApplying {
		e = apperr.Errorf(apperr.ECONFLICT, "This proposal is being applied.")
	}
	e.Extra = map[string]any{"proposal_status": cur.Status}
	return e
}

// Reject refuses a pending proposal with a reason the agent will read.
func (s *Service) Reject(ctx context.Context, p auth.Principal, id uuid.UUID, reason string) (Proposal, error) {
	if p.IsAgent() {
		return Proposal{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot reject proposals; the owner of the conversation or notebook does.")
	}
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n < 1 || n > 500 {
		return Proposal{}, apperr.Invalid("Give a reason of 1 to 500 characters.", apperr.FieldError{Field: "reason", Message: "must have 1 to 500 characters"})
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if _, err := q.GetProposal(ctx, db.GetProposalParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID}); errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, ErrNotFound
	} else if err != nil {
		return Proposal{}, fmt.Errorf("proposals: get: %w", err)
	}
	row, err := q.RejectProposal(ctx, db.RejectProposalParams{ID: id, WorkspaceID: p.WorkspaceID, RejectionReason: pgtype.Text{String: reason, Valid: true}, ResolvedByUserID: nullUUID(p.UserID),
		FromStatus: StatusPending})
	if errors.Is(err, pgx.ErrNoRows) {
		tx.Rollback(ctx)
		return Proposal{}, s.notPending(ctx, p, id)
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: reject: %w", err)
	}
	keep := audit.DefaultRetention
	if tool, ok := s.toolOf(row.Tool, row.CallerDeclaration); ok {
		keep = tool.Contract.Retention
	}
	if err := audit.RecordRetained(ctx, q, p, p.WorkspaceID, keep, "proposal.rejected", "proposal", id.String(), map[string]any{"reason": reason, "tool": row.Tool}); err != nil {
		return Proposal{}, err
	}
	if err := s.rejected(ctx, q, p, row, reason); err != nil {
		return Proposal{}, err
	}
	return s.committed(ctx, tx, row, "rejection")
}

// Get returns one of the caller's proposals (the agent reads the outcome and
// any rejection reason here).
func (s *Service) Get(ctx context.Context, p auth.Principal, id uuid.UUID) (Proposal, error) {
	row, err := s.q.GetProposal(ctx, db.GetProposalParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, ErrNotFound
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: get: %w", err)
	}
	out := fromRow(row)
	if out.State() == policy.StateDeferred {
		a, err := s.q.GetApprovalForProposal(ctx, db.GetApprovalForProposalParams{ProposalID: id, WorkspaceID: row.WorkspaceID})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return Proposal{}, fmt.Errorf("proposals: get approval: %w", err)
		}
		if err == nil {
			out.Packet = packetOf(a)
		}
	}
	if out.Ticket, err = s.ticketFor(ctx, p, row); err != nil {
		return Proposal{}, err
	}
	return out, nil
}

// State is the decision's final state ("" for proposals decided before
// decisions were recorded).
func (p Proposal) State() policy.State {
	if p.Decision == nil {
		return ""
	}
	return p.Decision.State
}

// Cells returns a notebook's cells in the order they were added. The caller
// has checked that the notebook is the principal's.
func (s *Service) Cells(ctx context.Context, p auth.Principal, notebookID uuid.UUID) ([]Proposal, error) {
	rows, err := s.q.ListProposalsForNotebook(ctx, db.ListProposalsForNotebookParams{WorkspaceID: p.WorkspaceID, NotebookID: nullUUID(notebookID)})
	if err != nil {
		return nil, fmt.Errorf("proposals: cells: %w", err)
	}
	out := make([]Proposal, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Tools returns the registry's declarations.
func (s *Service) Tools() []*tools.Tool { return s.tools.List() }

// Tool returns one declaration.
func (s *Service) Tool(name string) (*tools.Tool, bool) { return s.tools.Get(name) }

// compact checks a call's arguments as strictly as every JSON body
// (strictjson: nesting, NUL, lone surrogates, duplicate keys, number
// size) and compacts them. Every path to a proposal, the API, the pages'
// forms, MCP and chat, passes through here, so nothing it refuses is ever
// stored, decided or written into a receipt.
func compact(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	if err := strictjson.Check(raw, strictjson.Limits{}); err != nil {
		if !json.Valid(raw) {
			return nil, errNotJSON()
		}
		return nil, ArgumentsError(err)
	}
	if err := json.Compact(&buf, raw); err != nil {
		return nil, errNotJSON()
	}
	return buf.Bytes(), nil
}

// errNotJSON is arguments that are not JSON at all.
func errNotJSON() error {
	return apperr.Invalid("The arguments must be valid JSON.", apperr.FieldError{Field: "arguments", Message: "must be valid JSON"})
}

// ArgumentsError is strictjson's refusal of a call's arguments as the
// caller's field error, naming the argument ("arguments.items.3").
func ArgumentsError(err error) error {
	var se *strictjson.Error
	if !errors.As(err, &se) {
		return errNotJSON()
	}
	field := "arguments"
	if se.Path != "" {
		field += "." + se.Path
	}
	return apperr.Invalid(fmt.Sprintf("The arguments are not acceptable JSON: %s at %s.", se.Reason, strconv.Quote(field)),
		apperr.FieldError{Field: field, Message: se.Reason})
}

// sameJSON compares two JSON documents by value (jsonb reorders keys).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

func nullUUID(id uuid.UUID) uuid.NullUUID { return uuid.NullUUID{UUID: id, Valid: id != uuid.Nil} }

func nullText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func scopeOf(r db.Proposal) Scope {
	if r.NotebookID.Valid {
		return InNotebook(r.NotebookID.UUID)
	}
	return InConversation(r.ConversationID.UUID)
}

func fromRow(r db.Proposal) Proposal {
	decision, effect := decodeDecisions(r.Decision, r.EffectDecision)
	return Proposal{
		ID: r.ID, Scope: scopeOf(r), Tool: r.Tool, Effect: policy.Effect(r.Effect),
		Arguments: r.Arguments, AppliedArguments: r.AppliedArguments, Rationale: r.Rationale,
		PermissionMode: policy.PermissionMode(r.PermissionMode.String), TrustLevel: policy.TrustLevel(r.TrustLevel.String),
		Disposition: r.Disposition, Authority: policy.Authority(r.Authority.String), Risk: policy.Risk(r.Risk.String),
		ActionClass: r.ActionClass.String, Decision: decision, EffectDecision: effect, DryRun: r.DryRun,
		Status: r.Status, Result: r.Result, Error: r.Error.String, RejectionReason: r.RejectionReason.String,
		ApplyPath: r.ApplyPath.String, ProposedBy: r.ProposedByKind, CreatedAt: r.CreatedAt, ClaimedAt: r.ClaimedAt, ResolvedAt: r.ResolvedAt,
		ProposedByUserID: r.ProposedByUserID, ProposedByTokenID: r.ProposedByTokenID, ResolvedByUserID: r.ResolvedByUserID,
		Declaration: tools.ParseDeclaration(r.CallerDeclaration), declaration: r.CallerDeclaration,
	}
}

// decodeDecisions decodes a call's decision at propose time and at effect
// (nil for one not taken). A call that ran at once was decided once and
// stores the same decision twice: it is decoded once (a page of 50 cards
// spent a sixth of its time decoding decisions), and each gets its own
// copy.
func decodeDecisions(atPropose, atEffect []byte) (*policy.Decision, *policy.Decision) {
	d := decodeDecision(atPropose)
	if d == nil || !bytes.Equal(atPropose, atEffect) {
		return d, decodeDecision(atEffect)
	}
	e := *d
	e.Layers, e.Constraints, e.Bounds = slices.Clone(d.Layers), slices.Clone(d.Constraints), slices.Clone(d.Bounds)
	if d.Grant != nil {
		g := *d.Grant
		e.Grant = &g
	}
	return d, &e
}

func decodeDecision(raw []byte) *policy.Decision {
	if len(raw) == 0 {
		return nil
	}
	var d policy.Decision
	if json.Unmarshal(raw, &d) != nil {
		return nil
	}
	return &d
}
