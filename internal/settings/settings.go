// Package settings owns a workspace's policy settings: the high-risk
// opt-ins, the internal email domains, the webhook allowlist, rationale
// enforcement and the approval rules. Only admins read or change them
// (the policy file may set and pin them: file.go), and every change is
// audited with its old and new value.
package settings

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
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
	// ConfirmRunsHighRisk lets a caller's confirm: true stand in for the
	// approver of a high-risk call (ADR-036's gate; off by default). Like
	// AutoApproveHighRisk it waives the risk gate only.
	ConfirmRunsHighRisk bool
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
	// Approvals are the escalation and quorum rules of approval packets;
	// nil in an update keeps the current ones.
	Approvals *ApprovalRules
}

// ApprovalRules say what happens to an approval packet nobody resolves,
// and how many approvers each role's packets need (issue 27, item 3). A
// packet takes the rules in force when it opens; a tool's own rules in the
// policy file come first (docs/policy.md, "Escalation and quorum").
type ApprovalRules struct {
	// EscalateAfterMinutes (0: never, up to a week) sends a packet still
	// pending after that long to EscalateToRole's holders as well.
	EscalateAfterMinutes int
	EscalateToRole       string
	// Quorums: for a role, how many distinct approvers (none the proposer
	// or the scope's owner) its packets need, 2 to 10. A role not named
	// needs one.
	Quorums map[string]int
}

// Limits of the approval rules.
const (
	MaxEscalateAfterMinutes = 7 * 24 * 60
	MaxQuorum               = 10
	maxQuorumRoles          = 50
)

// roleName is a workspace role (approver, admin) or a named approver role.
var roleName = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)

// ParseQuorums reads quorums as people type them: one "role: k" (or
// "role=k", or "role k") per line or comma. k must be 2 to MaxQuorum.
func ParseQuorums(field, text string) (map[string]int, error) {
	out := map[string]int{}
	for _, entry := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' || r == ';' }) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.FieldsFunc(entry, func(r rune) bool { return r == ':' || r == '=' || r == ' ' || r == '\t' })
		if len(parts) != 2 {
			return nil, apperr.Invalid(fmt.Sprintf("%q is not a quorum: write one role and a number per line, like finance-approver: 2.", entry),
				apperr.FieldError{Field: field, Message: fmt.Sprintf("%q is not \"role: number\"", entry)})
		}
		role := strings.ToLower(parts[0])
		if !roleName.MatchString(role) {
			return nil, apperr.Invalid(fmt.Sprintf("%q is not a role name.", parts[0]),
				apperr.FieldError{Field: field, Message: fmt.Sprintf("%q is not a role name (lower case letters, digits and dashes)", parts[0])})
		}
		k, err := strconv.Atoi(parts[1])
		if err != nil || k < 2 || k > MaxQuorum {
			return nil, apperr.Invalid(fmt.Sprintf("The quorum of %s must be a whole number from 2 to %d.", role, MaxQuorum),
				apperr.FieldError{Field: field, Message: fmt.Sprintf("the quorum of %s must be 2 to %d", role, MaxQuorum)})
		}
		if _, dup := out[role]; dup {
			return nil, apperr.Invalid(fmt.Sprintf("The role %s is named twice.", role), apperr.FieldError{Field: field, Message: fmt.Sprintf("%s is named twice", role)})
		}
		out[role] = k
	}
	if len(out) > maxQuorumRoles {
		return nil, apperr.Invalid(fmt.Sprintf("At most %d roles.", maxQuorumRoles), apperr.FieldError{Field: field, Message: fmt.Sprintf("at most %d roles", maxQuorumRoles)})
	}
	return out, nil
}

// QuorumsText writes quorums back as ParseQuorums reads them, by role.
func QuorumsText(q map[string]int) string {
	roles := make([]string, 0, len(q))
	for r := range q {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	lines := make([]string, len(roles))
	for i, r := range roles {
		lines[i] = fmt.Sprintf("%s: %d", r, q[r])
	}
	return strings.Join(lines, "\n")
}

// check validates the rules, naming the field at fault.
func (r ApprovalRules) check() error {
	if r.EscalateAfterMinutes < 0 || r.EscalateAfterMinutes > MaxEscalateAfterMinutes {
		return apperr.Invalid(fmt.Sprintf("Escalate after 0 (never) to %d minutes.", MaxEscalateAfterMinutes),
			apperr.FieldError{Field: "escalate_after_minutes", Message: fmt.Sprintf("must be 0 (never) to %d", MaxEscalateAfterMinutes)})
	}
	if r.EscalateAfterMinutes > 0 && !roleName.MatchString(r.EscalateToRole) {
		return apperr.Invalid("Name the role a packet is escalated to (admin, approver or a named approver role).",
			apperr.FieldError{Field: "escalate_to_role", Message: "is required to escalate, and must be a role name"})
	}
	for role, k := range r.Quorums {
		if !roleName.MatchString(role) || k < 1 || k > MaxQuorum {
			return apperr.Invalid("A quorum is a role and 2 to 10 approvers.", apperr.FieldError{Field: "approval_quorums", Message: fmt.Sprintf("%s: %d is not a quorum", role, k)})
		}
	}
	return nil
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
	// pins are the policy file's pinned settings (nil: none), as the last
	// ApplyFile put them in force.
	pins atomic.Pointer[filePins]
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
	} else if s.keepsPinned(next, "rationale_mode") {
		// The file's, whose end date may be past (strict by itself then).
	} else if err := checkRationaleMode(next, time.Now()); err != nil {
		return Settings{}, err
	}
	if next.RationaleMode == RationaleStrict {
		next.RationaleWarnUntil = nil
	}
	rules := rulesOf(cur)
	if next.Approvals != nil {
		if err := next.Approvals.check(); err != nil {
			return Settings{}, err
		}
		rules = *next.Approvals
		if rules.EscalateAfterMinutes == 0 {
			rules.EscalateToRole = ""
		}
		if rules.Quorums == nil {
			rules.Quorums = map[string]int{}
		}
	}
	next.Approvals = &rules
	if err := s.checkPinned(next); err != nil {
		return Settings{}, err
	}
	row, err := write(ctx, q, p, cur, next, nil)
	if err != nil {
		return Settings{}, err
	}
	return fromRow(row), tx.Commit(ctx)
}

// write stores next (its Approvals set) as the workspace's settings and
// records each change (an audit row workspace.setting_changed and a
// setting-change receipt, with the old and new value, by p; extra is
// added to each change's data).
func write(ctx context.Context, q *db.Queries, p auth.Principal, cur db.Workspace, next Settings, extra func(setting string) map[string]any) (db.Workspace, error) {
	rules := *next.Approvals
	quorums, err := json.Marshal(rules.Quorums)
	if err != nil {
		return db.Workspace{}, fmt.Errorf("settings: encode quorums: %w", err)
	}
	next.InternalDomains = nonNil(next.InternalDomains)
	next.WebhookAllowlist = nonNil(next.WebhookAllowlist)
	row, err := q.UpdateWorkspaceSettings(ctx, db.UpdateWorkspaceSettingsParams{ID: cur.ID, AutoApproveHighRisk: next.AutoApproveHighRisk,
		InternalDomains: next.InternalDomains, WebhookAllowlist: next.WebhookAllowlist, RationaleMinLength: int32(next.RationaleMinLength),
		RationaleMode: next.RationaleMode, RationaleWarnUntil: next.RationaleWarnUntil,
		EscalateAfterMinutes: int32(rules.EscalateAfterMinutes), EscalateToRole: pgtype.Text{String: rules.EscalateToRole, Valid: rules.EscalateToRole != ""},
		ApprovalQuorums: quorums, ConfirmRunsHighRisk: next.ConfirmRunsHighRisk})
	if err != nil {
		return db.Workspace{}, fmt.Errorf("settings: update: %w", err)
	}
	changes := []struct {
		name     string
		old, new any
		same     bool
	}{
		{"auto_approve_high_risk", cur.AutoApproveHighRisk, next.AutoApproveHighRisk, cur.AutoApproveHighRisk == next.AutoApproveHighRisk},
		{"confirm_runs_high_risk", cur.ConfirmRunsHighRisk, next.ConfirmRunsHighRisk, cur.ConfirmRunsHighRisk == next.ConfirmRunsHighRisk},
		{"internal_domains", cur.InternalDomains, next.InternalDomains, slices.Equal(cur.InternalDomains, next.InternalDomains)},
		{"webhook_allowlist", cur.WebhookAllowlist, next.WebhookAllowlist, slices.Equal(cur.WebhookAllowlist, next.WebhookAllowlist)},
		{"rationale_min_length", cur.RationaleMinLength, next.RationaleMinLength, int(cur.RationaleMinLength) == next.RationaleMinLength},
		{"rationale_mode", cur.RationaleMode, next.RationaleMode, cur.RationaleMode == next.RationaleMode},
		{"rationale_warn_until", timeOrNil(cur.RationaleWarnUntil), timeOrNil(next.RationaleWarnUntil), sameTime(cur.RationaleWarnUntil, next.RationaleWarnUntil)},
		{"escalate_after_minutes", cur.EscalateAfterMinutes, rules.EscalateAfterMinutes, int(cur.EscalateAfterMinutes) == rules.EscalateAfterMinutes},
		{"escalate_to_role", cur.EscalateToRole.String, rules.EscalateToRole, cur.EscalateToRole.String == rules.EscalateToRole},
		{"approval_quorums", rulesOf(cur).Quorums, rules.Quorums, maps.Equal(rulesOf(cur).Quorums, rules.Quorums)},
	}
	actor := receipts.ActorOf(p, string(p.Role))
	if p.IsSystem() {
		actor = receipts.Actor{Kind: "system"}
	}
	for _, c := range changes {
		if c.same {
			continue
		}
		data := map[string]any{"setting": c.name, "old": c.old, "new": c.new}
		if extra != nil {
			maps.Copy(data, extra(c.name))
		}
		if err := audit.Record(ctx, q, p, cur.ID, "workspace.setting_changed", "workspace", cur.ID.String(), data); err != nil {
			return db.Workspace{}, err
		}
		if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, actor, cur.ID, data, time.Now()); err != nil {
			return db.Workspace{}, err
		}
	}
	return row, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func fromRow(w db.Workspace) Settings {
	rules := rulesOf(w)
	return Settings{AutoApproveHighRisk: w.AutoApproveHighRisk, ConfirmRunsHighRisk: w.ConfirmRunsHighRisk, InternalDomains: nonNil(w.InternalDomains), WebhookAllowlist: nonNil(w.WebhookAllowlist),
		RationaleMinLength: int(w.RationaleMinLength), RationaleMode: w.RationaleMode, RationaleWarnUntil: w.RationaleWarnUntil, Approvals: &rules}
}

// rulesOf reads a workspace row's approval rules.
func rulesOf(w db.Workspace) ApprovalRules {
	r := ApprovalRules{EscalateAfterMinutes: int(w.EscalateAfterMinutes), EscalateToRole: w.EscalateToRole.String, Quorums: map[string]int{}}
	_ = json.Unmarshal(w.ApprovalQuorums, &r.Quorums) // the column's check keeps it an object
	return r
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
