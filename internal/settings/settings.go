// Package settings owns a workspace's policy settings: the high-risk
// opt-in, the internal email domains and the webhook allowlist. Only admins
// read or change them, and every change is audited with its old and new
// value.
package settings

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// Settings are a workspace's policy settings.
type Settings struct {
	// AutoApproveHighRisk lets high-risk calls run without an approval
	// packet (off by default). It never lets a destructive call in a
	// conversation run without its owner.
	AutoApproveHighRisk bool
	// InternalDomains classify email to them as email.send.internal.
	InternalDomains []string
	// WebhookAllowlist is where webhook.post may post (empty: nowhere).
	WebhookAllowlist []string
	// RationaleMinLength is the shortest rationale a call may give
	// (10 to 500; every call needs at least 10 characters).
	RationaleMinLength int
	// RationaleMode is strict (a missing or short rationale is refused) or
	// warn (accepted with a warning until RationaleWarnUntil, then strict
	// again by itself). Empty keeps the current mode.
	RationaleMode string
	// RationaleWarnUntil ends warn mode (required for it, in the future).
	RationaleWarnUntil *time.Time
}

// Rationale enforcement modes.
const (
	RationaleStrict = "strict"
	RationaleWarn   = "warn"
)

// Service reads and changes settings.
type Service struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// NewService returns the settings service.
func NewService(pool *pgxpool.Pool) *Service { return &Service{pool: pool, q: db.New(pool)} }

var errAdminsOnly = apperr.Errorf(apperr.EFORBIDDEN, "Only admins change workspace settings.")

func adminOnly(p auth.Principal) error {
	if !p.IsAdmin() || p.IsAgent() {
		return errAdminsOnly
	}
	return nil
}

// Get returns the caller's workspace settings (admins only).
func (s *Service) Get(ctx context.Context, p auth.Principal) (Settings, error) {
	if err := adminOnly(p); err != nil {
		return Settings{}, err
	}
	ws, err := s.q.GetWorkspace(ctx, p.WorkspaceID)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: get: %w", err)
	}
	return fromRow(ws), nil
}

var hostname = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

// Domains reads a list of domains as people type it (commas, spaces or
// lines; a leading "@" is dropped), lowercased, sorted, without repeats.
func Domains(field, text string) ([]string, error) {
	var out []string
	for _, d := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' }) {
		d = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(d), "@"), ".")
		if len(d) > 253 || !hostname.MatchString(d) {
			return nil, apperr.Invalid(fmt.Sprintf("%q is not a domain.", d), apperr.FieldError{Field: field, Message: fmt.Sprintf("%q is not a domain", d)})
		}
		out = append(out, d)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 100 {
		return nil, apperr.Invalid("At most 100 domains.", apperr.FieldError{Field: field, Message: "at most 100 domains"})
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// Update stores new settings (admins only), auditing each change.
func (s *Service) Update(ctx context.Context, p auth.Principal, next Settings) (Settings, error) {
	if err := adminOnly(p); err != nil {
		return Settings{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	cur, err := q.GetWorkspaceForUpdate(ctx, p.WorkspaceID)
	if err != nil {
		return Settings{}, fmt.Errorf("settings: get: %w", err)
	}
	if next.RationaleMinLength == 0 {
		next.RationaleMinLength = int(cur.RationaleMinLength)
	}
	if next.RationaleMinLength < 10 || next.RationaleMinLength > 500 {
		return Settings{}, apperr.Invalid("The minimum rationale length must be 10 to 500 characters.",
			apperr.FieldError{Field: "rationale_min_length", Message: "must be 10 to 500"})
	}
	if next.RationaleMode == "" {
		next.RationaleMode, next.RationaleWarnUntil = cur.RationaleMode, cur.RationaleWarnUntil
	} else if err := checkRationaleMode(next, time.Now()); err != nil {
		return Settings{}, err
	}
	if next.RationaleMode == RationaleStrict {
		next.RationaleWarnUntil = nil
	}
	next.InternalDomains = nonNil(next.InternalDomains)
	next.WebhookAllowlist = nonNil(next.WebhookAllowlist)
	row, err := q.UpdateWorkspaceSettings(ctx, db.UpdateWorkspaceSettingsParams{ID: p.WorkspaceID, AutoApproveHighRisk: next.AutoApproveHighRisk,
		InternalDomains: next.InternalDomains, WebhookAllowlist: next.WebhookAllowlist, RationaleMinLength: int32(next.RationaleMinLength),
		RationaleMode: next.RationaleMode, RationaleWarnUntil: next.RationaleWarnUntil})
	if err != nil {
		return Settings{}, fmt.Errorf("settings: update: %w", err)
	}
	changes := []struct {
		name     string
		old, new any
		same     bool
	}{
		{"auto_approve_high_risk", cur.AutoApproveHighRisk, next.AutoApproveHighRisk, cur.AutoApproveHighRisk == next.AutoApproveHighRisk},
		{"internal_domains", cur.InternalDomains, next.InternalDomains, slices.Equal(cur.InternalDomains, next.InternalDomains)},
		{"webhook_allowlist", cur.WebhookAllowlist, next.WebhookAllowlist, slices.Equal(cur.WebhookAllowlist, next.WebhookAllowlist)},
		{"rationale_min_length", cur.RationaleMinLength, next.RationaleMinLength, int(cur.RationaleMinLength) == next.RationaleMinLength},
		{"rationale_mode", cur.RationaleMode, next.RationaleMode, cur.RationaleMode == next.RationaleMode},
		{"rationale_warn_until", timeOrNil(cur.RationaleWarnUntil), timeOrNil(next.RationaleWarnUntil), sameTime(cur.RationaleWarnUntil, next.RationaleWarnUntil)},
	}
	for _, c := range changes {
		if c.same {
			continue
		}
		if err := audit.Record(ctx, q, p, p.WorkspaceID, "workspace.setting_changed", "workspace", p.WorkspaceID.String(),
			map[string]any{"setting": c.name, "old": c.old, "new": c.new}); err != nil {
			return Settings{}, err
		}
		if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID,
			map[string]any{"setting": c.name, "old": c.old, "new": c.new}, time.Now()); err != nil {
			return Settings{}, err
		}
	}
	return fromRow(row), tx.Commit(ctx)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func fromRow(w db.Workspace) Settings {
	return Settings{AutoApproveHighRisk: w.AutoApproveHighRisk, InternalDomains: nonNil(w.InternalDomains), WebhookAllowlist: nonNil(w.WebhookAllowlist),
		RationaleMinLength: int(w.RationaleMinLength), RationaleMode: w.RationaleMode, RationaleWarnUntil: w.RationaleWarnUntil}
}

// checkRationaleMode checks the mode, and that warn mode has an end date
// in the future.
func checkRationaleMode(next Settings, now time.Time) error {
	switch next.RationaleMode {
	case RationaleStrict:
		return nil
	case RationaleWarn:
		if next.RationaleWarnUntil == nil || !next.RationaleWarnUntil.After(now) {
			return apperr.Invalid("Warn mode needs an end date in the future.",
				apperr.FieldError{Field: "rationale_warn_until", Message: "is required for warn mode and must be in the future"})
		}
		return nil
	}
	return apperr.Invalid("The rationale mode is strict or warn.", apperr.FieldError{Field: "rationale_mode", Message: "must be strict or warn"})
}

func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
