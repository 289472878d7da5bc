package proposals

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/internal/trust"
)

// Caller-executed calls (tools.Tool.Caller). They are proposed, decided
// and claimed like any call; where the service would run the tool, the
// claim commits and the call stays applying: its caller runs it. The
// caller holds an execution ticket, which is stateless:
//
//	ticket = base64url(HMAC-SHA256(key, proposal id | proposing token id |
//	                                SHA-256(JCS(arguments that run)) | expiry))
//
// with the key derived from the deployment's cursor key and the expiry
// the claim's time plus TicketLifetime. It is single use because the
// proposal is: a report moves applying → applied or failed once. A call
// not reported before its ticket expires is marked failed, unreported
// (MarkUnreported), and counted against its class's trust.

// TicketLifetime is how long a caller has to run a call and report it.
const TicketLifetime = 5 * time.Minute

// MaxReportedResult bounds a reported result (its compact JSON).
const MaxReportedResult = 256 << 10

// Unreported is the error of a call whose caller never reported it.
const Unreported = "unreported: the caller did not report the outcome before the ticket expired"

// unreportedBatch bounds one sweep's unreported calls.
const unreportedBatch = 500

// Outcomes a caller reports.
const (
	ReportSucceeded = "succeeded"
	ReportFailed    = "failed"
)

// Ticket lets the caller run one call, with its arguments, until
// ExpiresAt.
type Ticket struct {
	Value     string
	ExpiresAt time.Time
}

// ticketKey is the tickets' key: derived from the cursor key with a label
// of its own, so no other signature can stand in for a ticket.
func (s *Service) ticketKey(ctx context.Context) ([]byte, error) {
	key, err := s.cursorKey.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("proposals: ticket key: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gatehouse caller execution ticket v1"))
	return m.Sum(nil), nil
}

// runArguments are the arguments the call runs with: the owner's edit, if
// any.
func runArguments(row db.Proposal) json.RawMessage {
	if len(row.AppliedArguments) > 0 {
		return row.AppliedArguments
	}
	return row.Arguments
}

// jcsDigest is the SHA-256 of a JSON document's canonical form (RFC 8785).
func jcsDigest(doc []byte) ([32]byte, error) {
	canonical, err := canonjson.Transform(doc)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(canonical), nil
}

// ticketExpiry is when a ticket of a call claimed at claimed expires (to
// the second: the expiry is signed as a Unix time).
func ticketExpiry(claimed time.Time) time.Time {
	return time.Unix(claimed.Add(TicketLifetime).Unix(), 0).UTC()
}

// ticketMAC is the ticket of the call row, as signed with key.
func ticketMAC(key []byte, row db.Proposal) ([]byte, error) {
	digest, err := jcsDigest(runArguments(row))
	if err != nil {
		return nil, fmt.Errorf("proposals: ticket arguments: %w", err)
	}
	token := row.ProposedByTokenID.UUID
	if !row.ProposedByTokenID.Valid {
		token = uuid.Nil
	}
	m := hmac.New(sha256.New, key)
	m.Write(row.ID[:])
	m.Write(token[:])
	m.Write(digest[:])
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(ticketExpiry(*row.ClaimedAt).Unix())))
	return m.Sum(nil), nil
}

// proposedBy reports whether p made the call: its user, and its token (or
// no token for both).
func proposedBy(p auth.Principal, row db.Proposal) bool {
	return row.ProposedByUserID == p.UserID && row.ProposedByTokenID == nullUUID(p.TokenID)
}

// ticketFor is the ticket of a caller-executed call that may run now, for
// the principal that proposed it; nil for anyone else and anything else.
func (s *Service) ticketFor(ctx context.Context, p auth.Principal, row db.Proposal) (*Ticket, error) {
	if row.Status != StatusApplying || row.ClaimedAt == nil || !proposedBy(p, row) || !s.callerCall(row) {
		return nil, nil
	}
	expires := ticketExpiry(*row.ClaimedAt)
	if !time.Now().Before(expires) {
		return nil, nil
	}
	key, err := s.ticketKey(ctx)
	if err != nil {
		return nil, err
	}
	mac, err := ticketMAC(key, row)
	if err != nil {
		return nil, err
	}
	return &Ticket{Value: base64.RawURLEncoding.EncodeToString(mac), ExpiresAt: expires}, nil
}

// awaitCaller is run's part for a caller-executed tool: the claim commits
// and the call waits, applying, for its caller's report; the proposer gets
// its ticket. A human-only call the principal performed themselves is
// done: nobody else runs it.
func (s *Service) awaitCaller(ctx context.Context, tx pgx.Tx, q *db.Queries, p auth.Principal, claimed db.Proposal, tool *tools.Tool, path string) (Proposal, error) {
	if path == PathPerformed {
		result, err := json.Marshal(map[string]any{"performed_by_principal": true, "note": "The principal performed it; no caller runs it."})
		if err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode result: %w", err)
		}
		row, err := s.finish(ctx, q, p, claimed, tool, path, result, "", false, false)
		if err != nil {
			return Proposal{}, err
		}
		return s.committed(ctx, tx, row, "result")
	}
	if err := tx.Commit(ctx); err != nil {
		return Proposal{}, fmt.Errorf("proposals: commit claim: %w", err)
	}
	s.announce(claimed, false)
	out := fromRow(claimed)
	ticket, err := s.ticketFor(ctx, p, claimed)
	if err != nil {
		// Claimed all the same: the caller reads its ticket with the call.
		s.log.Error("issuing an execution ticket", "proposal_id", claimed.ID, "err", err)
	}
	out.Ticket = ticket
	return out, nil
}

// Report is a caller's report of a call it ran with its ticket.
type Report struct {
	Ticket string
	// Status is ReportSucceeded or ReportFailed.
	Status string
	// Result (any JSON) or ResultDigest (SHA-256, hex) for a success;
	// both optional, not both.
	Result       json.RawMessage
	ResultDigest string
	// Error says why it failed (required for ReportFailed).
	Error string
	// Arguments, when sent, are what the caller ran: they must be those
	// the ticket allows.
	Arguments json.RawMessage
	// Rationale is why the caller reports (MCP's report_outcome takes one
	// like every tool), kept in the audit row.
	Rationale string
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkedReport is a report that passed the checks made before anything
// is read.
type checkedReport struct {
	mac    []byte
	result []byte
	digest string
	args   *[32]byte
}

// check validates a report's fields, naming each at fault.
func (r Report) check() (checkedReport, error) {
	var out checkedReport
	var fields []apperr.FieldError
	bad := func(field, msg string) { fields = append(fields, apperr.FieldError{Field: field, Message: msg}) }
	mac, err := base64.RawURLEncoding.Strict().DecodeString(r.Ticket)
	if err != nil || len(mac) != sha256.Size {
		bad("ticket", "is not an execution ticket")
	}
	out.mac = mac
	result := json.RawMessage(strings.TrimSpace(string(r.Result)))
	if string(result) == "null" {
		result = nil
	}
	switch r.Status {
	case ReportSucceeded:
		if r.Error != "" {
			bad("error", "goes only with status failed")
		}
	case ReportFailed:
		if n := utf8.RuneCountInString(strings.TrimSpace(r.Error)); n < 1 || n > 2000 {
			bad("error", "must have 1 to 2000 characters saying why it failed")
		}
		if len(result) > 0 || r.ResultDigest != "" {
			bad("result", "goes only with status succeeded")
		}
	default:
		bad("status", "must be succeeded or failed")
	}
	if len(result) > 0 && r.ResultDigest != "" {
		bad("result_digest", "send result or result_digest, not both")
	}
	if r.ResultDigest != "" && !hexDigest.MatchString(r.ResultDigest) {
		bad("result_digest", "must be a SHA-256 digest in lower-case hex (64 characters)")
	}
	if len(result) > 0 {
		if err := strictjson.Check(result, strictjson.Limits{}); err != nil {
			bad("result", "must be acceptable JSON")
		} else if b, err := compactJSON(result); err != nil {
			bad("result", "must be valid JSON")
		} else if len(b) > MaxReportedResult {
			bad("result", fmt.Sprintf("has more than %d bytes; report its result_digest instead", MaxReportedResult))
		} else if d, err := jcsDigest(b); err != nil {
			bad("result", "must be valid JSON")
		} else {
			out.result, out.digest = b, hex.EncodeToString(d[:])
		}
	}
	if r.ResultDigest != "" && len(fields) == 0 {
		out.digest = r.ResultDigest
	}
	if len(r.Arguments) > 0 {
		args, err := compact(r.Arguments)
		var d [32]byte
		if err == nil {
			d, err = jcsDigest(args)
		}
		if err != nil {
			bad("arguments", "must be the JSON object the call ran with")
		} else {
			out.args = &d
		}
	}
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Field
		}
		return checkedReport{}, apperr.Invalid("Invalid fields: "+strings.Join(names, ", ")+".", fields...)
	}
	return out, nil
}

func compactJSON(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// refusedTicket is a ticket that does not let this caller report this
// call.
func refusedTicket(msg, why string) error {
	return &apperr.Error{Code: apperr.EFORBIDDEN, Message: msg, Fields: []apperr.FieldError{{Field: "ticket", Message: why}}}
}

// ReportOutcome records what the caller found when it ran a call with its
// ticket: the call finishes as any call whose effect is outside
// Gatehouse (finish: applied or failed, its audit row, its receipt and,
// where a person let it run, their judgment), on the path its claim took.
// The ticket must be this call's, for its arguments, issued to this token
// and not expired; a call reported already is a conflict. Nothing is
// written for a refused report.
func (s *Service) ReportOutcome(ctx context.Context, p auth.Principal, id uuid.UUID, r Report) (Proposal, error) {
	rep, err := r.check()
	if err != nil {
		return Proposal{}, err
	}
	key, err := s.ticketKey(ctx)
	if err != nil {
		return Proposal{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetProposalForUpdate(ctx, db.GetProposalForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Proposal{}, ErrNotFound
	}
	if err != nil {
		return Proposal{}, fmt.Errorf("proposals: get: %w", err)
	}
	conflict := func(format string, args ...any) error {
		e := apperr.Errorf(apperr.ECONFLICT, format, args...)
		e.Extra = map[string]any{"proposal_status": cur.Status}
		return e
	}
	tool, ok := s.toolOf(cur.Tool, cur.CallerDeclaration)
	if !ok || !tool.Caller {
		return Proposal{}, conflict("%s is run by Gatehouse, not by its caller: there is no outcome to report.", cur.Tool)
	}
	if !proposedBy(p, cur) {
		return Proposal{}, refusedTicket("This call was proposed with another token: only its tickets' holder reports it.", "was issued to another token")
	}
	if cur.ClaimedAt == nil {
		return Proposal{}, conflict("This call may not run (it is %s): no ticket was issued for it.", cur.Status)
	}
	want, err := ticketMAC(key, cur)
	if err != nil {
		return Proposal{}, err
	}
	if !hmac.Equal(rep.mac, want) {
		return Proposal{}, refusedTicket("This is not the ticket of this call: it was altered, or issued for another call or other arguments.", "is not this call's ticket")
	}
	if rep.args != nil {
		if d, err := jcsDigest(runArguments(cur)); err != nil || d != *rep.args {
			return Proposal{}, &apperr.Error{Code: apperr.EFORBIDDEN, Message: "The ticket allows the call with other arguments than those reported.",
				Fields: []apperr.FieldError{{Field: "arguments", Message: "differ from the arguments the ticket allows"}}}
		}
	}
	if cur.Status != StatusApplying {
		return Proposal{}, conflict("The outcome of this call was reported already: it is %s. A ticket is used once.", cur.Status)
	}
	if expires := ticketExpiry(*cur.ClaimedAt); !time.Now().Before(expires) {
		return Proposal{}, refusedTicket(fmt.Sprintf("The ticket expired at %s; the call is marked unreported.", expires.Format(time.RFC3339)), "has expired")
	}
	result, failure := rep.result, ""
	if r.Status == ReportFailed {
		failure = strings.TrimSpace(r.Error)
	} else if result != nil {
		result = redact(result, cur.Constraints)
	} else if rep.digest != "" {
		if result, err = json.Marshal(map[string]string{"result_digest": rep.digest}); err != nil {
			return Proposal{}, fmt.Errorf("proposals: encode result: %w", err)
		}
	}
	extra := map[string]any{"reported_by": "caller", "reported": r.Status}
	if rep.digest != "" {
		extra["result_digest"] = rep.digest
	}
	if r.Rationale != "" {
		extra["rationale"] = r.Rationale
	}
	row, err := s.finishWith(ctx, q, p, cur, tool, claimPath(cur), result, failure, false, false, extra)
	if err != nil {
		return Proposal{}, err
	}
	return s.committed(ctx, tx, row, "report")
}

// claimPath is the path a claimed call took, as its finish names it: the
// stored apply path, and a grant's where one let it through.
func claimPath(row db.Proposal) string {
	switch row.ApplyPath.String {
	case PathHuman, PathApproval:
		return row.ApplyPath.String
	}
	if d := decodeDecision(row.EffectDecision); d != nil && d.Grant != nil {
		return PathGrant
	}
	return PathAuto
}

// MarkUnreported marks failed the caller-executed calls whose ticket
// expired at now without a report (the sweeper passes the time; tests a
// later one): each with its audit row (proposal.unreported), its receipt
// and evidence against its class, as a violation. It returns the calls:
// those of the policy file's caller tools and those declared with the
// call.
func (s *Service) MarkUnreported(ctx context.Context, now time.Time) ([]uuid.UUID, error) {
	names := s.tools.CallerTools()
	rows, err := s.q.ListUnreportedCalls(ctx, db.ListUnreportedCallsParams{Cutoff: ptr(now.Add(-TicketLifetime)), Tools: names, MaxRows: unreportedBatch})
	if err != nil {
		return nil, fmt.Errorf("proposals: list unreported calls: %w", err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		marked, err := s.markUnreported(ctx, r.WorkspaceID, r.ID)
		if err != nil {
			return ids, err
		}
		if marked {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// markUnreported marks one call unreported, unless its report came first.
func (s *Service) markUnreported(ctx context.Context, ws, id uuid.UUID) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("proposals: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	row, err := q.FinishProposal(ctx, db.FinishProposalParams{ID: id, WorkspaceID: ws, Status: StatusFailed, Error: pgtype.Text{String: Unreported, Valid: true}})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // reported (or settled) meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("proposals: mark unreported: %w", err)
	}
	system := auth.Principal{WorkspaceID: ws}
	tool, ok := s.toolOf(row.Tool, row.CallerDeclaration)
	if !ok {
		return false, fmt.Errorf("proposals: %s is no longer declared", row.Tool)
	}
	data := map[string]any{"tool": row.Tool, "path": claimPath(row), "error": Unreported}
	if row.ClaimedAt != nil {
		data["ticket_expired_at"] = ticketExpiry(*row.ClaimedAt).Format(time.RFC3339)
	}
	markIrreversible(data, tool, false)
	if err := s.audit(ctx, q, system, tool, "proposal.unreported", "proposal", id.String(), data); err != nil {
		return false, err
	}
	rid, err := s.record(ctx, q, system, receipts.KindExpiry, "unreported", row, Unreported)
	if err != nil {
		return false, err
	}
	if err := s.judge(ctx, q, system, row, trust.LabelViolation, rid); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("proposals: commit unreported: %w", err)
	}
	s.announce(row, false)
	return true, nil
}

// Waits are bounded: a caller waits at most MaxWait for a change.
const (
	MinWait = time.Second
	MaxWait = time.Minute
)

// Wait is Get once the call's status differs from seen (the status the
// caller last read; "" for a call that waits for a person: pending or
// pending_approval), or when d has passed. It reads the row with a
// backoff from 50 ms to 500 ms and holds no connection in between.
func (s *Service) Wait(ctx context.Context, p auth.Principal, id uuid.UUID, seen string, d time.Duration) (Proposal, error) {
	deadline := time.Now().Add(d)
	backoff := 50 * time.Millisecond
	for {
		prop, err := s.Get(ctx, p, id)
		if err != nil {
			return Proposal{}, err
		}
		waiting := prop.Status == seen
		if seen == "" {
			waiting = prop.Status == StatusPending || prop.Status == StatusPendingApproval
		}
		left := time.Until(deadline)
		if !waiting || left <= 0 {
			return prop, nil
		}
		t := time.NewTimer(min(backoff, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return prop, ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// callTool is the tool a call names, and its declaration as it is kept
// with the call: the one its caller declares with it (see
// tools.Registry.DeclaredTool), or the registry's (no declaration).
func (s *Service) callTool(in Input) (*tools.Tool, json.RawMessage, error) {
	if in.Declaration == nil {
		tool, ok := s.tools.Get(in.Tool)
		if !ok {
			return nil, nil, unknownTool(in.Tool)
		}
		return tool, nil, nil
	}
	return s.tools.DeclaredTool(in.Tool, *in.Declaration)
}

// toolOf is the tool a recorded call is decided and recorded under now:
// its kept declaration's (with the policy file as it is now), or the
// registry's.
func (s *Service) toolOf(name string, declaration []byte) (*tools.Tool, bool) {
	if len(declaration) == 0 {
		return s.tools.Get(name)
	}
	tool, err := s.tools.RedeclaredTool(name, declaration)
	if err != nil {
		s.log.Warn("a call's declared tool", "tool", name, "err", err)
		return nil, false
	}
	return tool, true
}

// ToolOf is the tool a proposal is decided under now (a card's edit
// form reads its schema).
func (s *Service) ToolOf(p Proposal) (*tools.Tool, bool) { return s.toolOf(p.Tool, p.declaration) }

// callerCall reports whether a recorded call is its caller's to run: its
// tool was declared with it, or is one of the policy file's caller tools.
func (s *Service) callerCall(row db.Proposal) bool {
	if len(row.CallerDeclaration) > 0 {
		return true
	}
	tool, ok := s.tools.Get(row.Tool)
	return ok && tool.Caller
}

// BeginIdempotentCall is BeginIdempotent for a call as its caller sent
// it: the key of a call whose tool is declared with it is held for the
// declared tool (a declaration that does not make one holds nothing:
// Propose answers its refusal).
func (s *Service) BeginIdempotentCall(ctx context.Context, p auth.Principal, scope Scope, in Input, hash []byte) (Begun, error) {
	tool, _, err := s.callTool(in)
	if err != nil {
		tool = nil
	}
	return s.beginIdempotent(ctx, p, scope, tool, in.IdempotencyKey, hash)
}
