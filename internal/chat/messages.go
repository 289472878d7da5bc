package chat

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// Message is one model message as a turn stores it (chat_turns.messages):
// Gatehouse's own shape, turned into the client library's on each request.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant or tool
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call the model made, as it sent it.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

const systemPrompt = `You are the assistant in a Gatehouse conversation. You may call the tools offered. Gatehouse decides each call by the conversation's permission mode and the tool's contract: it runs at once, waits for the owner's confirmation, or waits for an approver, and some calls are refused. Every call needs a "rationale": one or two sentences (10 to 500 characters) saying why you make it. A call's result says whether it was applied (with its result), rejected (with the reason), refused (with the reason) or invalid (fix the arguments and call again). Answer in plain text when you are done.`

// A new turn's context from the transcript is bounded whatever the
// conversation's length (docs/chat.md): the latest historyLines lines, as
// many of them as fit in historyChars characters (a line longer than
// historyLineChars is cut), and the calls that still wait, up to
// historyOpenCalls, even when their lines are older. Each is one bounded
// read.
const (
	historyLines     = 60
	historyChars     = 24000
	historyLineChars = 4000
	historyOpenCalls = 20
)

// history is the transcript so far as model messages, oldest first: the
// owner's and the assistant's words, a line for each earlier tool call
// and what became of it, and first a line for each call that still waits
// from before those. Notices are Gatehouse's, not the conversation's.
func (s *Service) history(ctx context.Context, q *db.Queries, workspace, conversation uuid.UUID) ([]Message, error) {
	rows, err := q.ListMessagesBefore(ctx, db.ListMessagesBeforeParams{WorkspaceID: workspace, ConversationID: conversation, Before: math.MaxInt64, MaxLines: historyLines})
	if err != nil {
		return nil, fmt.Errorf("chat: transcript: %w", err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		if r.ProposalID.Valid {
			ids = append(ids, r.ProposalID.UUID)
		}
	}
	props := map[uuid.UUID]db.Proposal{}
	if len(ids) > 0 {
		cards, err := q.ListConversationCards(ctx, db.ListConversationCardsParams{Ids: ids, WorkspaceID: workspace,
			ConversationID: uuid.NullUUID{UUID: conversation, Valid: true}, MaxCards: historyLines})
		if err != nil {
			return nil, fmt.Errorf("chat: transcript calls: %w", err)
		}
		for _, c := range cards {
			props[c.Proposal.ID] = c.Proposal
		}
	}
	open, err := q.ListOpenInConversation(ctx, db.ListOpenInConversationParams{WorkspaceID: workspace,
		ConversationID: uuid.NullUUID{UUID: conversation, Valid: true}, MaxCalls: historyOpenCalls})
	if err != nil {
		return nil, fmt.Errorf("chat: waiting calls: %w", err)
	}

	// The latest lines first, while they fit.
	var out []Message
	budget := historyChars
	for _, r := range rows { // newest first
		var m Message
		switch r.Role {
		case "user", "assistant":
			m = Message{Role: r.Role, Content: clip.Ellipsis(r.Content, historyLineChars)}
		case "tool":
			p, ok := props[r.ProposalID.UUID]
			if !ok {
				continue
			}
			m = Message{Role: "assistant", Content: toolLine(p)}
		default:
			continue
		}
		if budget -= utf8.RuneCountInString(m.Content); budget < 0 {
			break
		}
		out = append(out, m)
	}
	// Then the calls that wait from before them (latest first too).
	for _, p := range open {
		if _, shown := props[p.ID]; shown {
			continue
		}
		out = append(out, Message{Role: "assistant", Content: fmt.Sprintf("(An earlier tool call still waits: %s, %s since %s)",
			p.Tool, p.Status, p.CreatedAt.UTC().Format(time.RFC3339))})
	}
	slices.Reverse(out)
	return out, nil
}

// toolLine is what the model reads of an earlier call.
func toolLine(p db.Proposal) string {
	line := fmt.Sprintf("(Earlier tool call %s: %s", p.Tool, p.Status)
	switch {
	case p.RejectionReason.String != "":
		line += ", reason: " + clip.Ellipsis(p.RejectionReason.String, 500)
	case p.Error.String != "":
		line += ", error: " + clip.Ellipsis(p.Error.String, 500)
	case len(p.Result) > 0:
		line += ", result: " + clip.Ellipsis(string(p.Result), 500)
	}
	return line + ")"
}

// agentName names the model's agent token: "model (gpt-4o)".
func agentName(model string) string { return clip.Ellipsis("model ("+model+")", 100) }

// modelAgent returns the owner's agent token for the model, creating it
// the first time: an agent token whose secret nobody holds (its hash is of
// random bytes never kept), so the model's calls are an agent's of the
// owner's, named in audit rows and receipts, listed on the owner's tokens
// page, and stopped by revoking it there.
func (s *Service) modelAgent(ctx context.Context, q *db.Queries, p auth.Principal, model string) (uuid.UUID, error) {
	name := agentName(model)
	id, err := q.FindModelAgentToken(ctx, db.FindModelAgentTokenParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Name: name})
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, fmt.Errorf("chat: model agent: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return uuid.Nil, fmt.Errorf("chat: model agent: %w", err)
	}
	sum := sha256.Sum256(secret)
	id, err = q.CreateModelAgentToken(ctx, db.CreateModelAgentTokenParams{WorkspaceID: p.WorkspaceID, UserID: p.UserID, Name: name, TokenHash: sum[:]})
	if err != nil {
		return uuid.Nil, fmt.Errorf("chat: model agent: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "token.created", "api_token", id.String(),
		map[string]any{"kind": auth.TokenAgent, "name": name, "owner": p.Email, "model": model, "purpose": "chat"}); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

// agentPrincipal is the principal a turn's calls act as; a revoked token
// stops the turn.
func (s *Service) agentPrincipal(ctx context.Context, token uuid.NullUUID) (auth.Principal, error) {
	if !token.Valid {
		return auth.Principal{}, errAgentRevoked
	}
	row, err := s.q.AgentPrincipal(ctx, token.UUID)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Principal{}, errAgentRevoked
	}
	if err != nil {
		return auth.Principal{}, fmt.Errorf("chat: model agent: %w", err)
	}
	return auth.Principal{UserID: row.UserID, Email: row.Email, WorkspaceID: row.WorkspaceID, Role: auth.Role(row.Role),
		TokenID: row.ID, TokenKind: auth.TokenAgent, TokenName: row.Name, ApproverRoles: row.ApproverRoles}, nil
}

var errAgentRevoked = apperr.Errorf(apperr.EFORBIDDEN, "The model's agent token was revoked; the turn stopped.")

// toolResult is what the model reads back for a call.
type toolResult struct {
	Status string              `json:"status"`
	Result json.RawMessage     `json:"result,omitempty"`
	Reason string              `json:"reason,omitempty"`
	Error  string              `json:"error,omitempty"`
	Fields []apperr.FieldError `json:"fields,omitempty"`
}

func (r toolResult) json() []byte {
	b, _ := json.Marshal(r)
	return b
}

// resultOf is the answer to a call from its row, or pending while its
// proposal waits for a person.
func resultOf(c db.ListToolCallsRow) (content string, pending bool) {
	if len(c.Outcome) > 0 {
		return string(c.Outcome), false
	}
	if !c.ProposalStatus.Valid {
		return string(toolResult{Status: "unknown", Error: "The proposal this call became is gone."}.json()), false
	}
	switch c.ProposalStatus.String {
	case "pending", "pending_approval", "applying":
		return "", true
	case "applied":
		return string(toolResult{Status: "applied", Result: c.ProposalResult}.json()), false
	case "failed":
		return string(toolResult{Status: "failed", Error: c.ProposalError.String}.json()), false
	case "rejected":
		return string(toolResult{Status: "rejected", Reason: c.ProposalRejectionReason.String}.json()), false
	case "expired":
		return string(toolResult{Status: "expired", Reason: "No approver decided in time; the call did not run."}.json()), false
	}
	return string(toolResult{Status: c.ProposalStatus.String}.json()), false
}

// idempotencyKey is a call's key: the same for the same call of the same
// turn, so a turn resumed after its instance stopped gets the proposal the
// call became instead of proposing it again.
func idempotencyKey(turn uuid.UUID, toolCallID string) string {
	sum := sha256.Sum256([]byte(turn.String() + "\x00" + toolCallID))
	return "chat-" + strings.TrimRight(fmt.Sprintf("%x", sum[:20]), "=")
}
