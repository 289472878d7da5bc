// Package conversations owns chat conversations: their durable permission
// mode and their transcript.
package conversations

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
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
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Conversation is a chat owned by one user.
type Conversation struct {
	ID             uuid.UUID
	Title          string
	PermissionMode policy.PermissionMode
	// Environment is where its calls take effect ("" until its owner says).
	Environment string
	CreatedAt   time.Time
	UpdatedAt   time.Time
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
	// key signs page cursors (cursor.go, list.go).
	key *cursor.Key
}

// NewService returns the conversations service.
func NewService(pool *pgxpool.Pool) *Service {
	q := db.New(pool)
	return &Service{pool: pool, q: q, key: cursor.NewKey(q)}
}

func fromRow(c db.Conversation) Conversation {
	return Conversation{ID: c.ID, Title: c.Title, PermissionMode: policy.PermissionMode(c.PermissionMode), Environment: c.Environment.String,
		CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
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
	return s.create(ctx, p, title, func(q *db.Queries, title string) (db.Conversation, error) {
		return q.CreateConversation(ctx, db.CreateConversationParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID, Title: title})
	})
}

// CreateWithID starts the caller's conversation with an id drawn before it
// was needed (an MCP session plans its conversation when it opens and the
// first tool call creates it, on whichever instance that reaches). It is
// created once, audited once: when it exists already (another instance
// created it), it is read, and another user's is not found.
func (s *Service) CreateWithID(ctx context.Context, p auth.Principal, id uuid.UUID, title string) (Conversation, error) {
	c, err := s.create(ctx, p, title, func(q *db.Queries, title string) (db.Conversation, error) {
		return q.CreateConversationWithID(ctx, db.CreateConversationWithIDParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID, Title: title})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return s.Get(ctx, p, id)
	}
	return c, err
}

// create inserts a conversation (insert; pgx.ErrNoRows when it wrote none)
// and audits it, in one transaction.
func (s *Service) create(ctx context.Context, p auth.Principal, title string, insert func(*db.Queries, string) (db.Conversation, error)) (Conversation, error) {
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
	c, err := insert(q, title)
	if errors.Is(err, pgx.ErrNoRows) {
		return Conversation{}, err
	}
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

// Update is a change to a conversation; nil fields stay as they are.
type Update struct {
	Title          *string
	PermissionMode *string
	// Environment is where its calls take effect (policy.Environments);
	// "" clears it.
	Environment *string
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
	env, err := NextEnvironment(cur.Environment, u.Environment)
	if err != nil {
		return Conversation{}, err
	}
	c, err := q.UpdateConversation(ctx, db.UpdateConversationParams{ID: id, Title: title, PermissionMode: mode, Environment: env})
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
	if env != cur.Environment {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "conversation.environment_changed", "conversation", id.String(),
			map[string]any{"old": cur.Environment.String, "new": env.String}); err != nil {
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
	m, err := s.q.InsertMessage(ctx, db.InsertMessageParams{WorkspaceID: p.WorkspaceID, ConversationID: id, Role: role, Content: content,
		AuthorUserID: uuid.NullUUID{UUID: p.UserID, Valid: true}})
	if err != nil {
		return Message{}, fmt.Errorf("conversations: post message: %w", err)
	}
	return messageFromRow(m), nil
}

// Page sizes of a transcript: DefaultLimit lines when the caller names no
// limit, at most MaxLimit.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// Range asks for one page of a transcript: at most Limit lines, the
// latest ones, or those before the Before cursor, or those after the
// After cursor (between both when both are given); oldest first in
// every case. Cursors come from an earlier Page of the same conversation,
// read by the same user.
type Range struct {
	Limit         int
	Before, After string
}

// Page is a page of a transcript, oldest first.
type Page struct {
	Messages []Message
	// Prev is the cursor of the lines before this page (for Before); ""
	// when there are none.
	Prev string
	// Next is the cursor of the lines after this page (for After): they
	// may exist now (Newer) or come later.
	Next  string
	Newer bool
}

// Messages returns a page of the caller's conversation. Every read is an
// index range with a LIMIT (messages_conversation_idx): it takes as long
// with a million lines as with ten. A limit out of range, or a cursor
// that is not one this conversation gave this caller for that direction,
// is refused naming the parameter, before any line is read.
func (s *Service) Messages(ctx context.Context, p auth.Principal, id uuid.UUID, r Range) (Page, error) {
	if r.Limit < 1 || r.Limit > MaxLimit {
		return Page{}, apperr.Invalid(fmt.Sprintf("The limit must be from 1 to %d lines.", MaxLimit),
			apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", MaxLimit)})
	}
	if _, err := s.Get(ctx, p, id); err != nil {
		return Page{}, err
	}
	key, err := s.key.Get(ctx)
	if err != nil {
		return Page{}, err
	}
	cur := pageCursors{key: key, conversation: id, user: p.UserID}
	before, after := int64(math.MaxInt64), int64(0)
	var bad []apperr.FieldError
	if r.Before != "" {
		var ok bool
		if before, ok = cur.decode(older, r.Before); !ok {
			bad = append(bad, apperr.FieldError{Field: "before", Message: "is not a cursor this conversation's pages gave you for earlier lines"})
		}
	}
	if r.After != "" {
		var ok bool
		if after, ok = cur.decode(newer, r.After); !ok {
			bad = append(bad, apperr.FieldError{Field: "after", Message: "is not a cursor this conversation's pages gave you for later lines"})
		}
	}
	if len(bad) > 0 {
		names := make([]string, len(bad))
		for i, f := range bad {
			names[i] = f.Field
		}
		return Page{}, apperr.Invalid("This page of the conversation cannot be read: ask again with the "+strings.Join(names, " and ")+
			" cursor of one of its own pages.", bad...)
	}

	var page Page
	var rows []db.TranscriptLine
	var olderExist, newerKnown bool
	if r.After != "" {
		rows, err = s.q.ListMessagesBetween(ctx, db.ListMessagesBetweenParams{WorkspaceID: p.WorkspaceID, ConversationID: id, After: after, Before: before, MaxLines: int32(r.Limit + 1)})
		if err != nil {
			return Page{}, fmt.Errorf("conversations: messages: %w", err)
		}
		if len(rows) > r.Limit {
			rows, page.Newer = rows[:r.Limit], true
		}
		// Without a before cursor, what came after the page is in it.
		newerKnown = page.Newer || r.Before == ""
	} else {
		rows, err = s.q.ListMessagesBefore(ctx, db.ListMessagesBeforeParams{WorkspaceID: p.WorkspaceID, ConversationID: id, Before: before, MaxLines: int32(r.Limit + 1)})
		if err != nil {
			return Page{}, fmt.Errorf("conversations: messages: %w", err)
		}
		if len(rows) > r.Limit {
			rows, olderExist = rows[:r.Limit], true
		}
		slices.Reverse(rows)
		// The latest page has nothing newer (as of this read).
		newerKnown = r.Before == ""
	}
	page.Messages = make([]Message, len(rows))
	for i, row := range rows {
		page.Messages[i] = lineFromRow(row)
	}

	// The other direction: one index probe each, when the read did not tell.
	first, last := after+1, after // an empty page: the position asked about
	if len(rows) > 0 {
		first, last = rows[0].ID, rows[len(rows)-1].ID
	} else if r.After == "" {
		first, last = before, 0 // nothing before "before"
	}
	if r.After != "" && after > 0 {
		prev, err := s.q.PreviousMessageID(ctx, db.PreviousMessageIDParams{WorkspaceID: p.WorkspaceID, ConversationID: id, Before: first})
		if err != nil {
			return Page{}, fmt.Errorf("conversations: messages: %w", err)
		}
		olderExist = prev != 0
	}
	if !newerKnown {
		next, err := s.q.NextMessageID(ctx, db.NextMessageIDParams{WorkspaceID: p.WorkspaceID, ConversationID: id, After: last})
		if err != nil {
			return Page{}, fmt.Errorf("conversations: messages: %w", err)
		}
		page.Newer = next != 0
	}
	if olderExist {
		page.Prev = cur.encode(older, first)
	}
	page.Next = cur.encode(newer, last)
	return page, nil
}

// lineFromRow is a transcript line: a message, or a call's line.
func lineFromRow(m db.TranscriptLine) Message {
	return Message{ID: m.ID, Role: m.Role, Content: m.Content, ProposalID: m.ProposalID.UUID, CreatedAt: m.CreatedAt}
}

func messageFromRow(m db.Message) Message {
	return Message{ID: m.ID, Role: m.Role, Content: m.Content, ProposalID: m.ProposalID.UUID, CreatedAt: m.CreatedAt}
}

// NextEnvironment is a scope's environment after an update that may name
// one (nil keeps cur; "" clears it); an unknown one is refused, naming the
// field.
func NextEnvironment(cur pgtype.Text, next *string) (pgtype.Text, error) {
	if next == nil {
		return cur, nil
	}
	if *next == "" {
		return pgtype.Text{}, nil
	}
	if !policy.ValidEnvironment(*next) {
		return cur, apperr.Invalid(fmt.Sprintf("The environment must be one of %s, or empty to clear it.", strings.Join(policy.Environments, ", ")),
			apperr.FieldError{Field: "environment", Message: "must be " + strings.Join(policy.Environments, ", ") + " or empty"})
	}
	return pgtype.Text{String: *next, Valid: true}, nil
}
