// Package notebooks owns notebooks, the workbench scope: an owner's ordered
// tool cells under a durable trust level. The cells themselves are
// proposals (internal/proposals); this package owns the notebook row.
package notebooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Notebook is a workbench owned by one user.
type Notebook struct {
	ID         uuid.UUID
	Title      string
	TrustLevel policy.TrustLevel
	// Environment is where its calls take effect ("" until its owner says).
	Environment string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ErrNotFound is what any caller gets for a notebook that is not theirs.
var ErrNotFound = apperr.Errorf(apperr.ENOTFOUND, "No such notebook.")

// Service is the notebooks service.
type Service struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// NewService returns the notebooks service.
func NewService(pool *pgxpool.Pool) *Service { return &Service{pool: pool, q: db.New(pool)} }

func fromRow(n db.Notebook) Notebook {
	return Notebook{ID: n.ID, Title: n.Title, TrustLevel: policy.TrustLevel(n.TrustLevel), Environment: n.Environment.String,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt}
}

func cleanTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		title = "New notebook"
	}
	if len([]rune(title)) > 200 {
		return "", apperr.Invalid("The title must have at most 200 characters.", apperr.FieldError{Field: "title", Message: "must have at most 200 characters"})
	}
	return title, nil
}

// Create starts a notebook owned by the caller (an agent's owner), at the
// default trust level, cautious.
func (s *Service) Create(ctx context.Context, p auth.Principal, title string) (Notebook, error) {
	title, err := cleanTitle(title)
	if err != nil {
		return Notebook{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	n, err := q.CreateNotebook(ctx, db.CreateNotebookParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID, Title: title})
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: create: %w", err)
	}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "notebook.created", "notebook", n.ID.String(), map[string]any{"title": title, "trust_level": n.TrustLevel}); err != nil {
		return Notebook{}, err
	}
	return fromRow(n), tx.Commit(ctx)
}

// Get returns one of the caller's notebooks.
func (s *Service) Get(ctx context.Context, p auth.Principal, id uuid.UUID) (Notebook, error) {
	n, err := s.q.GetNotebook(ctx, db.GetNotebookParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Notebook{}, ErrNotFound
	}
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: get: %w", err)
	}
	return fromRow(n), nil
}

// List returns the caller's notebooks, most recent first.
func (s *Service) List(ctx context.Context, p auth.Principal) ([]Notebook, error) {
	rows, err := s.q.ListNotebooks(ctx, db.ListNotebooksParams{WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if err != nil {
		return nil, fmt.Errorf("notebooks: list: %w", err)
	}
	out := make([]Notebook, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r.Notebook)
		out[i].UpdatedAt = r.ActiveAt
	}
	return out, nil
}

// Update is a change to a notebook; nil fields stay as they are.
type Update struct {
	Title      *string
	TrustLevel *string
	// Environment is where its calls take effect (policy.Environments);
	// "" clears it.
	Environment *string
}

// Update changes the title or the trust level. Only the owner, never an
// agent token: an agent must not raise its own trust. Every change of
// level is audited with the old and new values.
func (s *Service) Update(ctx context.Context, p auth.Principal, id uuid.UUID, u Update) (Notebook, error) {
	if p.IsAgent() {
		return Notebook{}, apperr.Errorf(apperr.EFORBIDDEN, "Agent tokens cannot change a notebook; its owner can.")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetNotebookForUpdate(ctx, db.GetNotebookForUpdateParams{ID: id, WorkspaceID: p.WorkspaceID, OwnerID: p.UserID})
	if errors.Is(err, pgx.ErrNoRows) {
		return Notebook{}, ErrNotFound
	}
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: get: %w", err)
	}
	title, trust := cur.Title, cur.TrustLevel
	if u.Title != nil {
		if title, err = cleanTitle(*u.Title); err != nil {
			return Notebook{}, err
		}
	}
	if u.TrustLevel != nil {
		if !policy.TrustLevel(*u.TrustLevel).Valid() {
			return Notebook{}, apperr.Invalid("The trust level must be cautious, trusted or autonomous.",
				apperr.FieldError{Field: "trust_level", Message: "must be cautious, trusted or autonomous"})
		}
		trust = *u.TrustLevel
	}
	env, err := conversations.NextEnvironment(cur.Environment, u.Environment)
	if err != nil {
		return Notebook{}, err
	}
	n, err := q.UpdateNotebook(ctx, db.UpdateNotebookParams{ID: id, Title: title, TrustLevel: trust, Environment: env})
	if err != nil {
		return Notebook{}, fmt.Errorf("notebooks: update: %w", err)
	}
	if trust != cur.TrustLevel {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "notebook.trust_level_changed", "notebook", id.String(),
			map[string]any{"old": cur.TrustLevel, "new": trust}); err != nil {
			return Notebook{}, err
		}
		if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID, map[string]any{
			"setting": "trust_level", "notebook_id": id.String(), "old": cur.TrustLevel, "new": trust}, time.Now()); err != nil {
			return Notebook{}, err
		}
	}
	if env != cur.Environment {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "notebook.environment_changed", "notebook", id.String(),
			map[string]any{"old": cur.Environment.String, "new": env.String}); err != nil {
			return Notebook{}, err
		}
	}
	if title != cur.Title {
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "notebook.renamed", "notebook", id.String(),
			map[string]any{"old": cur.Title, "new": title}); err != nil {
			return Notebook{}, err
		}
	}
	return fromRow(n), tx.Commit(ctx)
}
