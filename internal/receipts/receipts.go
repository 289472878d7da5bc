// Package receipts keeps the record that proves what happened: every
// consequential outcome (an execution, a refusal, a correction, an expiry, a
// change of a setting, a role or a violation) leaves a receipt, written in
// the transaction of the outcome, so no outcome exists without its receipt.
// A sequencer chains each workspace's receipts later, off the call path:
// content_hash = sha256(JCS(content)),
// hash = sha256(JCS({receipt_id, seq, prev_hash, content_hash, metadata})).
package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/strictjson"
)

// Kinds of receipt.
const (
	KindExecution     = "execution"      // a call ran (auto, owner, approval, performed)
	KindRefusal       = "refusal"        // rejected, blocked, a broken constraint, human-only for the agent
	KindCorrection    = "correction"     // arguments edited before the call ran, both versions
	KindExpiry        = "expiry"         // an approval packet nobody resolved in time
	KindSettingChange = "setting_change" // a permission mode, trust level or workspace setting
	KindRoleChange    = "role_change"    // a named approver role granted or revoked
	KindViolation     = "violation"      // a violation flagged or cleared
	KindRedaction     = "redaction"      // a receipt's content redacted
)

// Actor is who acted, as a receipt names them.
type Actor struct {
	Kind    string `json:"kind"` // user, agent or system
	UserID  string `json:"user_id,omitempty"`
	TokenID string `json:"token_id,omitempty"`
	Role    string `json:"role,omitempty"`
}

// Content is what a receipt records. Fields that do not apply stay empty.
type Content struct {
	ReceiptID   string `json:"receipt_id"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	// Outcome names it within its kind: auto, owner, approval, performed
	// (executions); rejected, blocked, constraint, human_only (refusals)…
	Outcome     string `json:"outcome,omitempty"`
	ProposalID  string `json:"proposal_id,omitempty"`
	Actor       Actor  `json:"actor"`
	ActionClass string `json:"action_class,omitempty"`
	Tool        string `json:"tool,omitempty"`
	// The decision at propose time and at the moment of effect.
	DecisionAtPropose json.RawMessage `json:"decision_at_propose,omitempty"`
	DecisionAtEffect  json.RawMessage `json:"decision_at_effect,omitempty"`
	// Arguments are those that ran (or would have); ArgumentsBefore what
	// the agent proposed, on a correction.
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsBefore json.RawMessage `json:"arguments_before,omitempty"`
	// ToolsHash is the hash of the tool declarations in force.
	ToolsHash string `json:"tools_hash,omitempty"`
	Rationale string `json:"rationale,omitempty"`
	// Reason says why (a rejection's reason, a broken constraint…).
	Reason string `json:"reason,omitempty"`
	// Change is a setting's old and new value, a role, a violation.
	Change map[string]any `json:"change,omitempty"`
	Time   string         `json:"time"`
}

// Metadata is what a receipt keeps through a redaction, hashed into the
// chain with its content hash.
type Metadata struct {
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	ProposalID  string `json:"proposal_id,omitempty"`
	ActionClass string `json:"action_class,omitempty"`
	Time        string `json:"time"`
}

// Canonical is the RFC 8785 (JCS) form of v.
func Canonical(v any) ([]byte, error) {
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("receipts: encode: %w", err)
		}
	}
	out, err := canonjson.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("receipts: canonicalise: %w", err)
	}
	return out, nil
}

// ContentHash is sha256(JCS(content)).
func ContentHash(content any) ([]byte, error) {
	if raw, ok := content.(json.RawMessage); ok {
		return sumCanonical(nil, raw)
	}
	b, err := Canonical(content)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// sumCanonical is sha256(prefix || JCS(doc) || suffix), canonicalised
// into a reused buffer (a verification hashes every receipt twice).
func sumCanonical(prefix, doc []byte, suffix ...[]byte) ([]byte, error) {
	bp := hashBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			hashBufs.Put(bp)
		}
	}()
	b, err := canonjson.Append(append((*bp)[:0], prefix...), doc)
	if err != nil {
		return nil, fmt.Errorf("receipts: canonicalise: %w", err)
	}
	for _, s := range suffix {
		b = append(b, s...)
	}
	*bp = b
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// hashBufs are the buffers sumCanonical writes into.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Prepared is a receipt ready to be written: its id, canonical content,
// content hash and metadata.
type Prepared struct {
	ID          uuid.UUID
	Kind        string
	ProposalID  uuid.NullUUID
	ActionClass string
	Content     []byte
	ContentHash []byte
	Metadata    []byte
}

// PrepareUnhashed fills c's ReceiptID, WorkspaceID and Time and encodes
// what is stored: the content as is and the metadata. The content's
// canonical form (RFC 8785) and its hash are the sequencer's to compute, in
// its batch, off the call path. Record uses it, and writes the receipt.
func PrepareUnhashed(workspaceID uuid.UUID, c Content, now time.Time) (Prepared, error) {
	return prepare(workspaceID, c, now, true)
}

// PrepareFresh is PrepareUnhashed for content whose arguments are a call's
// as it was just proposed, which every path to a proposal checks as
// strictly as hashable would and more (strictjson with its default
// limits: proposals' compact): the content is not scanned again. The
// automatic path, which writes the receipt with the call's other rows in
// one statement, uses it.
func PrepareFresh(workspaceID uuid.UUID, c Content, now time.Time) (Prepared, error) {
	return prepare(workspaceID, c, now, false)
}

func prepare(workspaceID uuid.UUID, c Content, now time.Time, check bool) (Prepared, error) {
	// Time-ordered (UUIDv7): a new receipt's key lands at the right edge
	// of the primary key's index instead of on a random page.
	id, err := uuid.NewV7()
	if err != nil {
		return Prepared{}, fmt.Errorf("receipts: id: %w", err)
	}
	c.ReceiptID, c.WorkspaceID = id.String(), workspaceID.String()
	c.Time = now.UTC().Format(time.RFC3339Nano)
	contentJSON, err := c.encode()
	if err != nil {
		return Prepared{}, fmt.Errorf("receipts: encode: %w", err)
	}
	if check {
		if err := hashable(contentJSON); err != nil {
			return Prepared{}, err
		}
	}
	meta := Metadata{WorkspaceID: c.WorkspaceID, Kind: c.Kind, ProposalID: c.ProposalID, ActionClass: c.ActionClass, Time: c.Time}
	var proposal uuid.NullUUID
	if pid, err := uuid.Parse(c.ProposalID); err == nil {
		proposal = uuid.NullUUID{UUID: pid, Valid: true}
	}
	return Prepared{ID: id, Kind: c.Kind, ProposalID: proposal, ActionClass: c.ActionClass, Content: contentJSON, Metadata: meta.encode()}, nil
}

// encode is json.Marshal(c), written directly for the fields an execution
// or refusal has (every call's receipt: encoding/json compacted the
// arguments and decisions, already compact, once more): the same members
// with the same omissions, each string a JSON string of the same value
// (invalid UTF-8 as U+FFFD), so the same canonical form and hash.
// A content with a change (settings, roles, violations: rare) goes
// through encoding/json.
func (c *Content) encode() ([]byte, error) {
	if c.Change != nil {
		return json.Marshal(c)
	}
	b := make([]byte, 0, 256+len(c.DecisionAtPropose)+len(c.DecisionAtEffect)+len(c.Arguments)+len(c.ArgumentsBefore)+len(c.Rationale)+len(c.Reason))
	b = appendMember(b, '{', "receipt_id", c.ReceiptID)
	b = appendMember(b, ',', "workspace_id", c.WorkspaceID)
	b = appendMember(b, ',', "kind", c.Kind)
	b = appendOptional(b, "outcome", c.Outcome)
	b = appendOptional(b, "proposal_id", c.ProposalID)
	b = append(b, `,"actor":`...)
	b = appendMember(b, '{', "kind", c.Actor.Kind)
	b = appendOptional(b, "user_id", c.Actor.UserID)
	b = appendOptional(b, "token_id", c.Actor.TokenID)
	b = appendOptional(b, "role", c.Actor.Role)
	b = append(b, '}')
	b = appendOptional(b, "action_class", c.ActionClass)
	b = appendOptional(b, "tool", c.Tool)
	for _, m := range [...]struct {
		name string
		raw  json.RawMessage
	}{{"decision_at_propose", c.DecisionAtPropose}, {"decision_at_effect", c.DecisionAtEffect}, {"arguments", c.Arguments}, {"arguments_before", c.ArgumentsBefore}} {
		if len(m.raw) == 0 {
			continue // omitempty
		}
		// As they are: JSON the service wrote, or arguments every path
		// checked strictly (hashable scans the whole content again where
		// that may not hold; PostgreSQL refuses anything else, and the
		// statement writes nothing).
		b = append(b, ',', '"')
		b = append(b, m.name...)
		b = append(b, '"', ':')
		b = append(b, m.raw...)
	}
	b = appendOptional(b, "tools_hash", c.ToolsHash)
	b = appendOptional(b, "rationale", c.Rationale)
	b = appendOptional(b, "reason", c.Reason)
	b = appendMember(b, ',', "time", c.Time)
	return append(b, '}'), nil
}

// encode is json.Marshal(m), written directly.
func (m *Metadata) encode() []byte {
	b := make([]byte, 0, 192)
	b = appendMember(b, '{', "workspace_id", m.WorkspaceID)
	b = appendMember(b, ',', "kind", m.Kind)
	b = appendOptional(b, "proposal_id", m.ProposalID)
	b = appendOptional(b, "action_class", m.ActionClass)
	b = appendMember(b, ',', "time", m.Time)
	return append(b, '}')
}

// appendMember appends sep, the member's name (a plain ASCII literal) and
// its string value.
func appendMember(b []byte, sep byte, name, value string) []byte {
	b = append(b, sep, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return canonjson.AppendString(b, value)
}

// appendOptional is appendMember after a member, for a string that is
// omitted when empty (omitempty).
func appendOptional(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return appendMember(b, ',', name, value)
}

// contentLimits bound what a receipt may hold: well inside what RFC 8785
// canonicalisation takes (canonjson nests at most 1000 deep), and loose
// enough for any arguments that passed the callers' strict checks (nested
// at most strictjson.DefaultMaxDepth) as PostgreSQL gives them back (a
// number stored as 1e300 comes back with 301 digits).
var contentLimits = strictjson.Limits{MaxDepth: 2 * strictjson.DefaultMaxDepth, MaxNumberLen: 1024}

// hashable refuses content the sequencer could not canonicalise, so no
// such receipt is ever stored: every path checks its input strictly
// first, so this only meets arguments stored before it did. The check is
// strictjson's single linear pass, not the canonicalisation itself.
func hashable(content []byte) error {
	err := strictjson.Check(content, contentLimits)
	if err == nil {
		return nil
	}
	var se *strictjson.Error
	if errors.As(err, &se) && (se.Path == "arguments" || strings.HasPrefix(se.Path, "arguments.") || strings.HasPrefix(se.Path, "arguments_before")) {
		return apperr.Invalid(fmt.Sprintf("The call's arguments cannot be recorded in a receipt: %s; nothing was done.", se.Reason),
			apperr.FieldError{Field: "arguments", Message: se.Reason})
	}
	return fmt.Errorf("receipts: content cannot be canonicalised: %w", err)
}

// Record writes a receipt for c with q, in the caller's transaction (the
// outcome's), unchained. It fills ReceiptID, WorkspaceID and Time.
func Record(ctx context.Context, q *db.Queries, workspaceID uuid.UUID, c Content, now time.Time) (uuid.UUID, error) {
	// The content's canonical hash is the sequencer's to compute, in its
	// batch: no outcome waits for RFC 8785.
	r, err := PrepareUnhashed(workspaceID, c, now)
	if err != nil {
		return uuid.Nil, err
	}
	if err := q.InsertReceipt(ctx, db.InsertReceiptParams{ID: r.ID, WorkspaceID: workspaceID, Kind: r.Kind, ProposalID: r.ProposalID,
		ActionClass: pgText(r.ActionClass), Content: r.Content, ContentHash: r.ContentHash, Metadata: r.Metadata}); err != nil {
		return uuid.Nil, fmt.Errorf("receipts: record %s: %w", c.Kind, err)
	}
	return r.ID, nil
}

func pgText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

// ActorOf names who acted, from an audit actor (auth.Principal is one) and
// their workspace role.
func ActorOf(a audit.Actor, role string) Actor {
	user, token, agent := a.AuditIdentity()
	out := Actor{Kind: "user", Role: role}
	switch {
	case user == uuid.Nil:
		return Actor{Kind: "system"}
	case agent:
		out.Kind = "agent"
	}
	out.UserID = user.String()
	if token != uuid.Nil {
		out.TokenID = token.String()
	}
	return out
}

// RecordChange records a change of a setting (a permission mode, a trust
// level, a workspace setting) or of a role, in the caller's transaction.
func RecordChange(ctx context.Context, q *db.Queries, kind string, actor Actor, workspaceID uuid.UUID, change map[string]any, now time.Time) (uuid.UUID, error) {
	return Record(ctx, q, workspaceID, Content{Kind: kind, Outcome: "changed", Actor: actor, Change: change}, now)
}
