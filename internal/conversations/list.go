package conversations

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/cursor"
	"github.com/gatehouse/gatehouse/internal/rollup"
)

// Page sizes of the conversations list: DefaultListLimit conversations
// when the caller names no limit, at most MaxListLimit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// ListPage asks for one page of the caller's conversations: at most
// Limit, the most recently active, or those after the Before cursor.
type ListPage struct {
	Limit  int
	Before string
}

// Listed is one page of conversations; Next is the cursor of the page
// after it ("" when there is none).
type Listed struct {
	Conversations []Conversation
	Next          string
}

// List returns a page of the caller's conversations, most recently active
// first (a conversation's activity, its UpdatedAt here, is the later of
// its own last change and its last line). It reads one page of an index
// however many conversations the caller has (migration 38). A limit out
// of range, or a cursor that is not one this list gave the caller, is
// refused (EINVALID, naming it).
func (s *Service) List(ctx context.Context, p auth.Principal, lp ListPage) (Listed, error) {
	if lp.Limit < 1 || lp.Limit > MaxListLimit {
		return Listed{}, apperr.Invalid(fmt.Sprintf("The limit must be from 1 to %d conversations.", MaxListLimit),
			apperr.FieldError{Field: "limit", Message: fmt.Sprintf("must be from 1 to %d", MaxListLimit)})
	}
	key, err := s.key.Get(ctx)
	if err != nil {
		return Listed{}, err
	}
	lc := listCursors{key: key, workspace: p.WorkspaceID, user: p.UserID}
	arg := db.ListConversationActivityParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID}
	if lp.Before != "" {
		at, id, ok := lc.decode(lp.Before)
		if !ok {
			return Listed{}, apperr.Invalid("This page of conversations cannot be read: ask again with the before cursor of one of your own pages.",
				apperr.FieldError{Field: "before", Message: "is not a cursor this list gave you"})
		}
		arg.Paged, arg.BeforeAt, arg.BeforeID = true, at, id
	}
	rows, err := s.listActive(ctx, p, arg, lp.Limit+1)
	if err != nil {
		return Listed{}, err
	}
	var out Listed
	if len(rows) > lp.Limit {
		rows = rows[:lp.Limit]
		last := rows[len(rows)-1]
		out.Next = lc.encode(last.UpdatedAt, last.ID)
	}
	out.Conversations = rows
	return out, nil
}

// tailRows is how many rows after each feed's watermark the list reads
// on its fast path: the feeds fold every quarter of a second, so a few
// hundred at most at a thousand calls a second.
const tailRows = 2000

// recentLines is the workspace's conversations with lines the roll-up has
// not folded yet, each with its last such line's time, in q's
// transaction: the fast path's statement on a generic plan
// (ConversationFeedsForList), which restores the planner's settings for
// the statements after it. A watermark further behind than tailRows rows
// (a roll-up that stalled) takes the exact path, on a custom plan.
func recentLines(ctx context.Context, q *db.Queries, ws uuid.UUID) ([]db.ListConversationTailRow, error) {
	feeds, err := q.ConversationFeedsForList(ctx)
	if err != nil {
		return nil, fmt.Errorf("conversations: list: the feeds: %w", err)
	}
	rows, err := q.ListRecentConversationLines(ctx, db.ListRecentConversationLinesParams{WorkspaceID: ws,
		MessagesFolded: feeds.MessagesFolded, CallsFolded: feeds.CallsFolded, MaxRows: tailRows,
		PriorPlanCacheMode: feeds.PriorPlanCacheMode, PriorJit: feeds.PriorJit})
	if err != nil {
		return nil, fmt.Errorf("conversations: list: the latest lines: %w", err)
	}
	if len(rows) > 0 && (rows[0].CallsRead >= tailRows || rows[0].MessagesRead >= tailRows) {
		tail, err := q.ListConversationTail(ctx, db.ListConversationTailParams{WorkspaceID: ws,
			MessagesFolded: feeds.MessagesFolded, CallsFolded: feeds.CallsFolded})
		if err != nil {
			return nil, fmt.Errorf("conversations: list: the latest lines: %w", err)
		}
		return tail, nil
	}
	tail := make([]db.ListConversationTailRow, 0, len(rows))
	for _, r := range rows {
		if r.ConversationID.Valid && r.ActiveAt != nil {
			tail = append(tail, db.ListConversationTailRow{ConversationID: r.ConversationID.UUID, ActiveAt: *r.ActiveAt})
		}
	}
	return tail, nil
}

// listActive reads up to n of the owner's conversations by activity,
// from arg's position on: the folded activity's index plus the lines
// after the feed's watermark, in one snapshot (a line folded between two
// reads would be in neither). A conversation with a line after the
// watermark may stand lower in the index than it does now, so the index
// is read for as many more rows as those lines have conversations.
func (s *Service) listActive(ctx context.Context, p auth.Principal, arg db.ListConversationActivityParams, n int) ([]Conversation, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("conversations: list: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	tail, err := recentLines(ctx, q, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	arg.Lim = int32(n + len(tail))
	folded, err := q.ListConversationActivity(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("conversations: list: %w", err)
	}
	latest := make(map[uuid.UUID]time.Time, len(tail))
	for _, t := range tail {
		latest[t.ConversationID] = t.ActiveAt
	}
	byID := make(map[uuid.UUID]Conversation, len(folded)+len(tail))
	for _, r := range folded {
		c := fromRow(r.Conversation)
		c.UpdatedAt = later(c.UpdatedAt, r.FoldedAt)
		byID[c.ID] = c
	}
	var missing []uuid.UUID
	for id := range latest {
		if _, ok := byID[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		more, err := q.ListConversationsByID(ctx, db.ListConversationsByIDParams{Ids: missing, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
		if err != nil {
			return nil, fmt.Errorf("conversations: list: %w", err)
		}
		for _, r := range more {
			byID[r.ID] = fromRow(r)
		}
	}
	// byID holds the caller's own conversations only: the tail's others
	// (the workspace's) were not found by ListConversationsByID.
	out := make([]Conversation, 0, len(byID))
	for _, c := range byID {
		c.UpdatedAt = later(c.UpdatedAt, latest[c.ID])
		if arg.Paged && !before(c, arg.BeforeAt, arg.BeforeID) {
			continue // above the cursor now: on a page already read
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Conversation) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return bytes.Compare(b.ID[:], a.ID[:])
	})
	return out[:min(n, len(out))], nil
}

// before reports whether c's place in the list, (activity, id) newest
// first, is after the position (at, id).
func before(c Conversation, at time.Time, id uuid.UUID) bool {
	if c.UpdatedAt.Equal(at) {
		return bytes.Compare(c.ID[:], id[:]) < 0
	}
	return c.UpdatedAt.Before(at)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The roll-up feeds that keep conversation_activity (rollup_feeds,
// migration 39): a conversation's messages by their ids, and its calls by
// their proposal.created audit rows' ids (every call writes one, naming
// its scope).
const (
	MessagesFeed = "conversation_messages"
	CallsFeed    = "conversation_calls"
)

// foldSpan is how many ids one turn of a feed folds at most.
const foldSpan = 20000

// RollUps are the turns of the feeds that keep conversations' activity
// (on every instance: one at a time folds each feed): they fold the
// messages and calls written since the last turn.
func (s *Service) RollUps() []rollup.Step {
	return []rollup.Step{
		func(ctx context.Context) (rollup.Progress, error) {
			return rollup.Advance(ctx, s.pool, messagesFeed(foldSpan))
		},
		func(ctx context.Context) (rollup.Progress, error) {
			return rollup.Advance(ctx, s.pool, callsFeed(foldSpan))
		},
	}
}

func messagesFeed(span int64) rollup.Feed {
	return rollup.Feed{Name: MessagesFeed, Tables: []string{"messages"},
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.MessagesHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			upto = min(upto, after+span)
			_, err := q.FoldConversationMessages(ctx, db.FoldConversationMessagesParams{After: after, Upto: upto})
			return upto, err
		},
	}
}

func callsFeed(span int64) rollup.Feed {
	return rollup.Feed{Name: CallsFeed, Tables: []string{"audit_events"}, GenericPlans: true,
		Head: func(ctx context.Context, q *db.Queries) (int64, error) { return q.AuditHead(ctx) },
		Fold: func(ctx context.Context, q *db.Queries, after, upto int64) (int64, error) {
			upto = min(upto, after+span)
			_, err := q.FoldConversationCalls(ctx, db.FoldConversationCallsParams{After: after, Upto: upto})
			return upto, err
		},
	}
}

// A list cursor is a position in one caller's conversations list, signed
// like the transcript's cursors (cursor.go):
//
//	base64url( version 1 | 'l' | activity: 8 bytes (µs) | conversation id: 16 bytes | tag: 12 bytes )
//
// tag = HMAC-SHA256(key, label | workspace | user | version | 'l' |
// activity | id)[:12]: another user's cursor, or an altered one, is
// refused.
const (
	listCursorLabel = "gatehouse conversations list cursor"
)

type listCursors struct {
	key             []byte
	workspace, user uuid.UUID
}

func (c listCursors) encode(at time.Time, id uuid.UUID) string {
	return cursor.EncodePosition(c.key, cursorTagLen, []byte{cursorVersion, 'l'}, at, id, []byte(listCursorLabel), c.workspace[:], c.user[:])
}

func (c listCursors) decode(s string) (time.Time, uuid.UUID, bool) {
	return cursor.DecodePosition(c.key, cursorTagLen, []byte{cursorVersion, 'l'}, s, []byte(listCursorLabel), c.workspace[:], c.user[:])
}
