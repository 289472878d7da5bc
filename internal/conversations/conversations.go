// Package conversations owns chat conversations: their durable permission
// mode and their transcript.
package conversations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Conversation is a chat owned by one user.
type Conversation struct {
	ID             uuid.UUID
	Title          string
	PermissionMode policy.PermissionMode
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Message is one line of the transcript. Tool messages point at a proposal.
type Message struct {
	ID         int64
	Role       string
	Content    string
	ProposalID uuid.UUID // uuid.Nil unless Role is "tool"
	CreatedAt  time.Time
}

// ErrNotFound is what any caller gets for a conversation that is not theirs.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such conversation.")

// Service is the conversations service.
type Service struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// NewService returns the conversations service.
func NewService(pool *pgxpool.Pool) *Service { return &Service{pool: pool, q: db.New(pool)} }

func fromRow(c db.Conversation) Conversation {
	return Conversation{ID: c.ID, Title: c.Title, PermissionMode: policy.PermissionMode(c.PermissionMode), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func cleanTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		title = "New conversation"
	}
	if len([]rune(title)) > 200 {
		return "", apperr.Invalid("The title must have at most 200 characters.", apperr.FieldError{Field: "title", Message: "must have at most 200 characters"})
	}
	return title, nil
}

// Create starts a conversation owned by the caller (an agent's owner).
func (s *Service) Create(ctx context.Context, p auth.Principal, title string) (Conversation, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Conversation{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	c, err := q.CreateConversation(ctx, db.CreateConversationParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID, Title: title})
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: create: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "conversation.created", "conversation", c.ID.String(), map[string]any{"title": title, "permission_mode": c.PermissionMode}); err != nil {
		return Conversation{}, err
	}
	return fromRow(c), tx.Commit(ctx)
}

// Get returns one of the caller's conversations.
func (s *Service) Get(ctx context.Context, p auth.Principal, id uuid.UUID) (Conversation, error) {
	c, err := s.q.GetConversation(ctx, db.GetConversationParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Conversation{}, ErrNotFound
	}
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: get: %w", err)
	}
	return fromRow(c), nil
}

// List returns the caller's conversations, most recent first.
func (s *Service) List(ctx context.Context, p auth.Principal) ([]Conversation, error) {
	rows, err := s.q.ListConversations(ctx, db.ListConversationsParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if err != nil {
		return nil, fmt.Errorf("conversations: list: %w", err)
	}
	out := make([]Conversation, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r.Conversation)
		out[i].UpdatedAt = r.ActiveAt
	}
	return out, nil
}

// Update is a change to a conversation; nil fields stay as they are.
type Update struct {
	Title          *string
	PermissionMode *string
}

// Update changes the title or the permission mode. Only the owner, never an
// agent token: an agent must not raise its own trust. Every change of mode
// is audited with the old and new values.
func (s *Service) Update(ctx context.Context, p auth.Principal, id uuid.UUID, u Update) (Conversation, error) {
	if p.IsAgent() {
		return Conversation{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot change a conversation; its owner can.")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetConversationForUpdate(ctx, db.GetConversationForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Conversation{}, ErrNotFound
	}
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: get: %w", err)
	}
	title, mode := cur.Title, cur.PermissionMode
	if u.Title != nil {
		if title, err = cleanTitle(*u.Title); err != nil {
			return Conversation{}, err
		}
	}
	if u.PermissionMode != nil {
		if !policy.PermissionMode(*u.PermissionMode).Valid() {
			return Conversation{}, apperr.Invalid("The permission mode must be approve or auto.", apperr.FieldError{Field: "permission_mode", Message: "must be approve or auto"})
		}
		mode = *u.PermissionMode
	}
	c, err := q.UpdateConversation(ctx, db.UpdateConversationParams{ID: id, Title: title, PermissionMode: mode})
	if err != nil {
		return Conversation{}, fmt.Errorf("conversations: update: %w", err)
	}
	if mode != cur.PermissionMode {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "conversation.permission_mode_changed", "conversation", id.String(),
			map[string]any{"old": cur.PermissionMode, "new": mode}); err != nil {
			return Conversation{}, err
		}
		if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID, map[string]any{
			"setting": "permission_mode", "conversation_id": id.String(), "old": cur.PermissionMode, "new": mode}, time.Now()); err != nil {
			return Conversation{}, err
		}
	}
	if title != cur.Title {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "conversation.renamed", "conversation", id.String(),
			map[string]any{"old": cur.Title, "new": title}); err != nil {
			return Conversation{}, err
		}
	}
	return fromRow(c), tx.Commit(ctx)
}

// PostMessage adds a user or assistant message. Agents speak as the
// assistant; only the owner speaks as the user.
func (s *Service) PostMessage(ctx context.Context, p auth.Principal, id uuid.UUID, role, content string) (Message, error) {
	if role != "user" && role != "assistant" {
		return Message{}, apperr.Invalid("The role must be user or assistant.", apperr.FieldError{Field: "role", Message: "must be user or assistant"})
	}
	if p.IsAgent() && role == "user" {
		return Message{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens post as the assistant, not as the user.")
	}
	content = strings.TrimSpace(content)
	if content == "" || utf8.RuneCountInString(content) > 20000 {
		return Message{}, apperr.Invalid("The message must have 1 to 20000 characters.", apperr.FieldError{Field: "content", Message: "must have 1 to 20000 characters"})
	}
	if _, err := s.Get(ctx, p, id); err != nil {
		return Message{}, err
	}
	m, err := s.q.InsertMessage(ctx, db.InsertMessageParams{ConversationID: id, Role: role, Content: content,
		AuthorUserID: uuid.NullUUID{UUID: p.UserID, Valid: true}})
	if err != nil {
		return Message{}, fmt.Errorf("conversations: post message: %w", err)
	}
	return messageFromRow(m), nil
}

// Transcript returns the conversation's messages, oldest first.
func (s *Service) Transcript(ctx context.Context, p auth.Principal, id uuid.UUID) ([]Message, error) {
	if _, err := s.Get(ctx, p, id); err != nil {
		return nil, err
	}
	rows, err := s.q.ListMessages(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("conversations: transcript: %w", err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = messageFromRow(r)
	}
	return out, nil
}

func messageFromRow(m db.Message) Message {
	return Message{ID: m.ID, Role: m.Role, Content: m.Content, ProposalID: m.ProposalID.UUID, CreatedAt: m.CreatedAt}
}
