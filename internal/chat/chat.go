// Package chat runs model turns in a conversation against an
// OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM,
// llama.cpp's server, LM Studio…), durable in PostgreSQL.
//
// A turn starts with the owner's message. The model gets the transcript
// and the registry's tools (each with a required rationale); every tool
// call it makes is proposed through the proposals service exactly like an
// agent's, as an agent of the conversation's owner (a per-owner "model"
// agent token no one can present), so the conversation's permission mode
// decides it. A call that waits for a card or a packet pauses the turn; it
// resumes on any instance when every call of the step is resolved. A turn
// is run by one instance at a time: it holds a lease on the turn's row,
// renewed while it runs; a turn whose instance stopped is resumed from its
// last durable state when the lease expires.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/openai/openai-go/v3"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// Config is the model endpoint and the limits of a turn.
type Config struct {
	// BaseURL is the endpoint's OpenAI-compatible base URL, such as
	// https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama).
	BaseURL string
	// APIKey is sent as a bearer token; never logged, never shown.
	APIKey string
	// Model is the default model; "" turns chat off.
	Model string
	// Models are the models a conversation may pick from (Model is always
	// one of them).
	Models []string
	// RequestTimeout bounds one model request, streaming included (2 min).
	RequestTimeout time.Duration
	// MaxToolCalls bounds the tool calls of one turn (20).
	MaxToolCalls int
	// Lease is how long a turn stays an instance's without being renewed
	// (30 s); a stopped instance's turns are resumed after it.
	Lease time.Duration
	// SweepEvery is how often each instance looks for turns to resume
	// besides the events that wake it (2 s).
	SweepEvery time.Duration
	// FlushEvery is how often streamed text is written for the page (150 ms).
	FlushEvery time.Duration
}

// Enabled reports whether a model is configured.
func (c Config) Enabled() bool { return c.Model != "" }

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = "https://api.openai.com/v1"
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 2 * time.Minute
	}
	if c.MaxToolCalls == 0 {
		c.MaxToolCalls = 20
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.SweepEvery == 0 {
		c.SweepEvery = 2 * time.Second
	}
	if c.FlushEvery == 0 {
		c.FlushEvery = 150 * time.Millisecond
	}
	models := []string{}
	if c.Model != "" {
		models = append(models, c.Model)
	}
	for _, m := range c.Models {
		if m = strings.TrimSpace(m); m != "" && !contains(models, m) {
			models = append(models, m)
		}
	}
	c.Models = models
	return c
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Announcer tells the pages and runners of every instance that something
// in a workspace changed (topic "conversation.<id>"), after commit.
type Announcer interface {
	Announce(ws uuid.UUID, topic string)
}

// State is where a turn is.
type State string

// Turn states.
const (
	StateRunning State = "running"
	StateWaiting State = "waiting"
	StateDone    State = "done"
	StateFailed  State = "failed"
	StateStopped State = "stopped"
)

// Active reports whether the turn is still going (it can be stopped).
func (s State) Active() bool { return s == StateRunning || s == StateWaiting }

// Turn is a model turn as the page and the API show it.
type Turn struct {
	ID               uuid.UUID
	ConversationID   uuid.UUID
	Model            string
	State            State
	Streaming        string
	PromptTokens     int64
	CompletionTokens int64
	Error            string
	Calls            []Call
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// Call is one tool call of a turn and what became of it.
type Call struct {
	ToolCallID string
	Tool       string
	ProposalID uuid.UUID // uuid.Nil: answered at once, without a proposal
	Status     string    // the proposal's status, or "answered"
}

// Settings are a conversation's model and token budget.
type Settings struct {
	Model string
	// Budget is the conversation's token budget (0: none).
	Budget int64
}

// Panel is what the conversation page shows of chat.
type Panel struct {
	Enabled  bool
	Models   []string
	Settings Settings
	// Agent names the principal the model's calls act as.
	Agent string
	// Tokens is the conversation's prompt + completion tokens so far.
	Tokens int64
	// Turn is the latest turn (nil: none yet).
	Turn *Turn
}

// Service starts, stops and runs turns. Each instance has one; its Run
// resumes the turns that need it.
type Service struct {
	cfg      Config
	pool     *pgxpool.Pool
	q        *db.Queries
	props    *proposals.Service
	announce Announcer
	log      *slog.Logger
	client   openai.Client
	// instance names this process in leases.
	instance string

	mu      sync.Mutex
	ctx     context.Context // ends when the service closes
	cancel  context.CancelFunc
	running map[uuid.UUID]context.CancelFunc
	wg      sync.WaitGroup
	wake    chan struct{}
}

// NewService returns the chat service of one instance. announce may be nil.
func NewService(cfg Config, pool *pgxpool.Pool, props *proposals.Service, announce Announcer, log *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, pool: pool, q: db.New(pool), props: props, announce: announce, log: log,
		instance: uuid.NewString(), ctx: ctx, cancel: cancel, running: map[uuid.UUID]context.CancelFunc{}, wake: make(chan struct{}, 1)}
	if cfg.Enabled() {
		s.client = newClient(cfg)
	}
	return s
}

// Config returns the service's configuration (with its defaults).
func (s *Service) Config() Config { return s.cfg }

// ErrNotFound is what a caller gets for a turn or conversation that is not theirs.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such turn.")

var errNoConversation = apperr.Errorf(apperr.ENOTFOUND, "No such conversation.")

// ErrNoModel is a user message sent for a turn when no model is configured.
var ErrNoModel = apperr.Errorf(apperr.ECONFLICT, "No model is set on this server (GATEHOUSE_LLM_MODEL); agents can post into this conversation over REST or MCP instead.")

func interval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

func text(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func (s *Service) notify(ws, conversation uuid.UUID) {
	if s.announce != nil {
		s.announce.Announce(ws, "conversation."+conversation.String())
	}
}

// owned checks that the conversation is the principal's own.
func (s *Service) owned(ctx context.Context, q *db.Queries, p auth.Principal, conversation uuid.UUID) error {
	_, err := q.OwnedConversation(ctx, db.OwnedConversationParams{ID: conversation, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoConversation
	}
	if err != nil {
		return fmt.Errorf("chat: conversation: %w", err)
	}
	return nil
}

// Started is a user message and the turn it started.
type Started struct {
	MessageID int64
	Content   string
	CreatedAt time.Time
	Turn      Turn
}

// Start records the owner's message in the transcript and starts a model
// turn on it, run at once by this instance. Only the owner in person or
// with their user token, never an agent; one turn at a time.
func (s *Service) Start(ctx context.Context, p auth.Principal, conversation uuid.UUID, content string) (Started, error) {
	if !s.cfg.Enabled() {
		return Started{}, ErrNoModel
	}
	if p.IsAgent() || p.UserID == uuid.Nil {
		return Started{}, apperr.Errorf(apperr.EFORBIDDEN, "Only the conversation's owner starts a model turn; agent tokens post as the assistant.")
	}
	content = strings.TrimSpace(content)
	if content == "" || utf8.RuneCountInString(content) > 20000 {
		return Started{}, apperr.Invalid("The message must have 1 to 20000 characters.", apperr.FieldError{Field: "content", Message: "must have 1 to 20000 characters"})
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Started{}, fmt.Errorf("chat: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	if err := s.owned(ctx, q, p, conversation); err != nil {
		return Started{}, err
	}
	settings, err := s.settings(ctx, q, conversation)
	if err != nil {
		return Started{}, err
	}
	if settings.Budget > 0 {
		used, err := q.ConversationTokens(ctx, db.ConversationTokensParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation})
		if err != nil {
			return Started{}, fmt.Errorf("chat: tokens: %w", err)
		}
		if total := used.PromptTokens + used.CompletionTokens; total >= settings.Budget {
			return Started{}, apperr.Errorf(apperr.ECONFLICT, "This conversation's token budget (%d tokens) is used up: %d tokens so far. Raise the budget to continue.", settings.Budget, total)
		}
	}
	history, err := s.history(ctx, q, p.WorkspaceID, conversation)
	if err != nil {
		return Started{}, err
	}
	msg, err := q.InsertChatMessage(ctx, db.InsertChatMessageParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation, Role: "user", Content: content,
		AuthorUserID: uuid.NullUUID{UUID: p.UserID, Valid: true}})
	if err != nil {
		return Started{}, fmt.Errorf("chat: message: %w", err)
	}
	token, err := s.modelAgent(ctx, q, p, settings.Model)
	if err != nil {
		return Started{}, err
	}
	msgs := append([]Message{{Role: "system", Content: systemPrompt}}, history...)
	msgs = append(msgs, Message{Role: "user", Content: content})
	raw, err := json.Marshal(msgs)
	if err != nil {
		return Started{}, fmt.Errorf("chat: encode messages: %w", err)
	}
	row, err := q.InsertTurn(ctx, db.InsertTurnParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation, OwnerID: p.UserID,
		AgentTokenID: uuid.NullUUID{UUID: token, Valid: true}, Model: settings.Model, Messages: raw,
		LeaseOwner: text(s.instance), Lease: interval(s.cfg.Lease)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return Started{}, apperr.Errorf(apperr.ECONFLICT, "The model is still on the previous message; wait for it or stop it.")
	}
	if err != nil {
		return Started{}, fmt.Errorf("chat: turn: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Started{}, fmt.Errorf("chat: commit: %w", err)
	}
	s.notify(p.WorkspaceID, conversation)
	s.launch(row.WorkspaceID, row.ID)
	return Started{MessageID: msg.ID, Content: msg.Content, CreatedAt: msg.CreatedAt, Turn: turnFrom(row, nil)}, nil
}

// settings returns the conversation's model (the default unless it picked
// one that is still configured) and budget.
func (s *Service) settings(ctx context.Context, q *db.Queries, conversation uuid.UUID) (Settings, error) {
	out := Settings{Model: s.cfg.Model}
	row, err := q.GetChatSettings(ctx, conversation)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("chat: settings: %w", err)
	}
	if row.Model.Valid && contains(s.cfg.Models, row.Model.String) {
		out.Model = row.Model.String
	}
	out.Budget = row.TokenBudget.Int64
	return out, nil
}

// SetSettings sets the conversation's model (one of the configured
// models) and token budget (0: none). The owner only, never an agent.
func (s *Service) SetSettings(ctx context.Context, p auth.Principal, conversation uuid.UUID, in Settings) (Settings, error) {
	if p.IsAgent() {
		return Settings{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot change a conversation's model or budget; its owner can.")
	}
	if err := s.owned(ctx, s.q, p, conversation); err != nil {
		return Settings{}, err
	}
	if in.Model == "" {
		in.Model = s.cfg.Model
	}
	if !contains(s.cfg.Models, in.Model) {
		return Settings{}, apperr.Invalid("Pick one of the configured models: "+strings.Join(s.cfg.Models, ", ")+".",
			apperr.FieldError{Field: "model", Message: "must be one of the configured models"})
	}
	if in.Budget < 0 || in.Budget > 1_000_000_000_000 {
		return Settings{}, apperr.Invalid("The token budget must be a whole number of tokens, or empty for none.",
			apperr.FieldError{Field: "token_budget", Message: "must be from 1 to 10^12, or empty"})
	}
	if _, err := s.q.UpsertChatSettings(ctx, db.UpsertChatSettingsParams{ConversationID: conversation, Model: text(in.Model),
		TokenBudget: pgtype.Int8{Int64: in.Budget, Valid: in.Budget > 0}}); err != nil {
		return Settings{}, fmt.Errorf("chat: settings: %w", err)
	}
	s.notify(p.WorkspaceID, conversation)
	return in, nil
}

// Panel returns what the conversation page shows of chat.
func (s *Service) Panel(ctx context.Context, p auth.Principal, conversation uuid.UUID) (Panel, error) {
	out := Panel{Enabled: s.cfg.Enabled(), Models: s.cfg.Models}
	if err := s.owned(ctx, s.q, p, conversation); err != nil {
		return out, err
	}
	var err error
	if out.Settings, err = s.settings(ctx, s.q, conversation); err != nil {
		return out, err
	}
	out.Agent = agentName(out.Settings.Model) + " for " + p.Email
	used, err := s.q.ConversationTokens(ctx, db.ConversationTokensParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation})
	if err != nil {
		return out, fmt.Errorf("chat: tokens: %w", err)
	}
	out.Tokens = used.PromptTokens + used.CompletionTokens
	row, err := s.q.LatestTurn(ctx, db.LatestTurnParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("chat: turn: %w", err)
	}
	t, err := s.withCalls(ctx, row)
	if err != nil {
		return out, err
	}
	out.Turn = &t
	return out, nil
}

// Get returns one of the owner's turns.
func (s *Service) Get(ctx context.Context, p auth.Principal, conversation, id uuid.UUID) (Turn, error) {
	row, err := s.q.GetOwnedTurn(ctx, db.GetOwnedTurnParams{ID: id, ConversationID: conversation, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, ErrNotFound
	}
	if err != nil {
		return Turn{}, fmt.Errorf("chat: turn: %w", err)
	}
	return s.withCalls(ctx, row)
}

func (s *Service) withCalls(ctx context.Context, row db.ChatTurn) (Turn, error) {
	calls, err := s.q.ListToolCalls(ctx, db.ListToolCallsParams{WorkspaceID: row.WorkspaceID, TurnID: row.ID})
	if err != nil {
		return Turn{}, fmt.Errorf("chat: calls: %w", err)
	}
	return turnFrom(row, calls), nil
}

func turnFrom(row db.ChatTurn, calls []db.ListToolCallsRow) Turn {
	t := Turn{ID: row.ID, ConversationID: row.ConversationID, Model: row.Model, State: State(row.State), Streaming: row.Streaming,
		PromptTokens: row.PromptTokens, CompletionTokens: row.CompletionTokens, Error: row.Error.String,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, Calls: []Call{}}
	for _, c := range calls {
		call := Call{ToolCallID: c.ToolCallID, Tool: c.Tool, ProposalID: c.ProposalID.UUID, Status: "answered"}
		if c.ProposalStatus.Valid && len(c.Outcome) == 0 {
			call.Status = c.ProposalStatus.String
		}
		t.Calls = append(t.Calls, call)
	}
	return t
}

// Stop stops a running or waiting turn of the owner's. Its calls that
// wait stay as they are (the owner still approves or rejects them); the
// model is not asked again.
func (s *Service) Stop(ctx context.Context, p auth.Principal, conversation, id uuid.UUID) (Turn, error) {
	if p.IsAgent() {
		return Turn{}, apperr.Errorf(apperr.EFORBIDDEN, "Only the conversation's owner stops a model turn.")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Turn{}, fmt.Errorf("chat: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetOwnedTurn(ctx, db.GetOwnedTurnParams{ID: id, ConversationID: conversation, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Turn{}, ErrNotFound
	}
	if err != nil {
		return Turn{}, fmt.Errorf("chat: turn: %w", err)
	}
	row, err := q.StopTurn(ctx, db.StopTurnParams{ID: id, WorkspaceID: p.WorkspaceID, Error: text("Stopped by " + p.Email + ".")})
	if errors.Is(err, pgx.ErrNoRows) {
		e := apperr.Errorf(apperr.ECONFLICT, "This turn is %s already.", cur.State)
		e.Extra = map[string]any{"state": cur.State}
		return Turn{}, e
	}
	if err != nil {
		return Turn{}, fmt.Errorf("chat: stop: %w", err)
	}
	if partial := strings.TrimSpace(cur.Streaming); partial != "" {
		if _, err := q.InsertChatMessage(ctx, db.InsertChatMessageParams{WorkspaceID: p.WorkspaceID, ConversationID: conversation, Role: "assistant", Content: clip.Ellipsis(partial, 20000),
			AuthorUserID: uuid.NullUUID{UUID: cur.OwnerID, Valid: true}}); err != nil {
			return Turn{}, fmt.Errorf("chat: message: %w", err)
		}
	}
	if err := notice(ctx, q, p.WorkspaceID, conversation, "The turn was stopped by "+p.Email+"."); err != nil {
		return Turn{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Turn{}, fmt.Errorf("chat: commit: %w", err)
	}
	s.mu.Lock()
	if cancel, ok := s.running[id]; ok {
		cancel() // this instance runs it: stop the model's request now
	}
	s.mu.Unlock()
	s.notify(p.WorkspaceID, conversation)
	return s.withCalls(ctx, row)
}

// notice writes a plain line in the transcript.
func notice(ctx context.Context, q *db.Queries, ws, conversation uuid.UUID, msg string) error {
	if _, err := q.InsertChatMessage(ctx, db.InsertChatMessageParams{WorkspaceID: ws, ConversationID: conversation, Role: "notice", Content: clip.Ellipsis(msg, 20000)}); err != nil {
		return fmt.Errorf("chat: notice: %w", err)
	}
	return nil
}
