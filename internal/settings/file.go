package settings

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The policy file's settings: section (tools.FileSettings) and the
// settings page have one precedence:
//
//   - a setting the file does not name is the settings page's;
//   - a setting the file names and pins is the file's: written to every
//     workspace whenever the file is loaded (at start and on every reload),
//     shown read-only on the page, and a change to it is refused, naming
//     the field, with nothing saved;
//   - a setting the file names without pinning is a default: written when
//     the file introduces it or changes its value (compared with what the
//     file last set, policy_file_settings), after which the page may change
//     it, and the file does not change it back until its own value changes.
//
// Every value the file writes is a setting change like a person's: an
// audit row workspace.setting_changed (by the system, with "by": "policy
// file" and whether it is pinned) and a setting-change receipt.

// filePins are the file's pinned settings, with the value each must keep
// (settingJSON's).
type filePins struct {
	pinned map[string]bool
	values map[string][]byte
}

// ApplyFile writes the policy file's settings to every workspace, in one
// transaction (see above), and makes its pinned settings the ones Update
// refuses to change. An empty section (or no file) pins nothing and
// forgets what the file set before.
func (s *Service) ApplyFile(ctx context.Context, fs tools.FileSettings) error {
	names := fs.Names()
	fileValues := withFile(Settings{Approvals: &ApprovalRules{Quorums: map[string]int{}}}, fs, names)
	values := map[string][]byte{}
	for _, n := range names {
		v, err := settingJSON(fileValues, n)
		if err != nil {
			return err
		}
		values[n] = v
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("settings: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := s.q.WithTx(tx)
	ids, err := q.ListWorkspaceIDsForUpdate(ctx)
	if err != nil {
		return fmt.Errorf("settings: lock workspaces: %w", err)
	}
	for _, id := range ids {
		if err := applyToWorkspace(ctx, q, id, fs, names, values); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("settings: commit the policy file's settings: %w", err)
	}
	pins := &filePins{pinned: map[string]bool{}, values: map[string][]byte{}}
	for n := range fs.Pinned {
		pins.pinned[n], pins.values[n] = true, values[n]
	}
	s.pins.Store(pins)
	return nil
}

// applyToWorkspace writes the file's settings to one workspace: the
// pinned ones, and the others the file introduces or changes.
func applyToWorkspace(ctx context.Context, q *db.Queries, ws uuid.UUID, fs tools.FileSettings, names []string, values map[string][]byte) error {
	cur, err := q.GetWorkspaceForUpdate(ctx, ws)
	if err != nil {
		return fmt.Errorf("settings: get: %w", err)
	}
	tracked, err := q.ListPolicyFileSettings(ctx, cur.ID)
	if err != nil {
		return fmt.Errorf("settings: read what the file set: %w", err)
	}
	last := map[string]db.ListPolicyFileSettingsRow{}
	for _, t := range tracked {
		last[t.Setting] = t
	}
	var apply []string
	for _, n := range names {
		t, had := last[n]
		same := had && sameJSON(t.Value, values[n])
		if fs.Pinned[n] || !same {
			apply = append(apply, n)
		}
		if !same || t.Pinned != fs.Pinned[n] {
			if err := q.PutPolicyFileSetting(ctx, db.PutPolicyFileSettingParams{WorkspaceID: cur.ID, Setting: n, Value: values[n], Pinned: fs.Pinned[n]}); err != nil {
				return fmt.Errorf("settings: remember %s: %w", n, err)
			}
		}
	}
	if err := q.DeletePolicyFileSettingsExcept(ctx, db.DeletePolicyFileSettingsExceptParams{WorkspaceID: cur.ID, Keep: nonNil(names)}); err != nil {
		return fmt.Errorf("settings: forget what the file no longer sets: %w", err)
	}
	now := fromRow(cur)
	next := withFile(now, fs, apply)
	changed := false
	for _, n := range apply {
		a, err := settingJSON(now, n)
		if err != nil {
			return err
		}
		if !bytes.Equal(a, values[n]) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	_, err = write(ctx, q, auth.System(cur.ID), cur, next, func(setting string) map[string]any {
		return map[string]any{"by": "policy file", "pinned": fs.Pinned[fileSetting(setting)]}
	})
	return err
}

// fileSetting is the policy file's name for a setting as write records it.
func fileSetting(recorded string) string {
	switch recorded {
	case "rationale_warn_until":
		return tools.SettingRationaleMode
	case "escalate_after_minutes":
		return tools.SettingEscalateAfter
	case "escalate_to_role":
		return tools.SettingEscalateTo
	}
	return recorded
}

// withFile is s with the file's value of each setting in names.
func withFile(s Settings, fs tools.FileSettings, names []string) Settings {
	rules := ApprovalRules{Quorums: map[string]int{}}
	if s.Approvals != nil {
		rules = *s.Approvals
		rules.Quorums = copyQuorums(rules.Quorums)
	}
	for _, n := range names {
		switch n {
		case tools.SettingAutoApproveHighRisk:
			s.AutoApproveHighRisk = *fs.AutoApproveHighRisk
		case tools.SettingConfirmRunsHighRisk:
			s.ConfirmRunsHighRisk = *fs.ConfirmRunsHighRisk
		case tools.SettingInternalDomains:
			s.InternalDomains = slices.Clone(fs.InternalDomains)
		case tools.SettingWebhookAllowlist:
			s.WebhookAllowlist = slices.Clone(fs.WebhookAllowlist)
		case tools.SettingRationaleMinLength:
			s.RationaleMinLength = *fs.RationaleMinLength
		case tools.SettingRationaleMode:
			s.RationaleMode, s.RationaleWarnUntil = fs.RationaleMode, nil
			if fs.RationaleMode == RationaleWarn {
				t := *fs.RationaleWarnUntil
				s.RationaleWarnUntil = &t
			}
		case tools.SettingEscalateAfter:
			rules.EscalateAfterMinutes = int(*fs.EscalateAfter / time.Minute)
		case tools.SettingEscalateTo:
			rules.EscalateToRole = *fs.EscalateTo
		case tools.SettingApprovalQuorums:
			rules.Quorums = copyQuorums(fs.ApprovalQuorums)
		}
	}
	if rules.EscalateAfterMinutes == 0 {
		rules.EscalateToRole = ""
	}
	s.Approvals = &rules
	return s
}

func copyQuorums(q map[string]int) map[string]int {
	out := make(map[string]int, len(q))
	for k, v := range q {
		out[k] = v
	}
	return out
}

// settingJSON is one setting of s, in canonical JSON: what the file's
// value and the workspace's are compared by.
func settingJSON(s Settings, name string) ([]byte, error) {
	var rules ApprovalRules
	if s.Approvals != nil {
		rules = *s.Approvals
	}
	var v any
	switch name {
	case tools.SettingAutoApproveHighRisk:
		v = s.AutoApproveHighRisk
	case tools.SettingConfirmRunsHighRisk:
		v = s.ConfirmRunsHighRisk
	case tools.SettingInternalDomains:
		v = nonNil(s.InternalDomains)
	case tools.SettingWebhookAllowlist:
		v = nonNil(s.WebhookAllowlist)
	case tools.SettingRationaleMinLength:
		v = s.RationaleMinLength
	case tools.SettingRationaleMode:
		mode := map[string]any{"mode": s.RationaleMode, "warn_until": nil}
		if s.RationaleMode == RationaleWarn {
			mode["warn_until"] = timeOrNil(s.RationaleWarnUntil)
		}
		v = mode
	case tools.SettingEscalateAfter:
		v = rules.EscalateAfterMinutes
	case tools.SettingEscalateTo:
		v = rules.EscalateToRole
	case tools.SettingApprovalQuorums:
		q := rules.Quorums
		if q == nil {
			q = map[string]int{}
		}
		v = q
	default:
		return nil, fmt.Errorf("settings: unknown setting %q", name)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("settings: encode %s: %w", name, err)
	}
	return canonjson.Transform(b)
}

// sameJSON reports whether stored (as PostgreSQL's jsonb gives it back)
// is the canonical value want.
func sameJSON(stored, want []byte) bool {
	c, err := canonjson.Transform(stored)
	return err == nil && bytes.Equal(c, want)
}

// formField is the settings page's field for a setting.
func formField(setting string) string {
	switch setting {
	case tools.SettingEscalateAfter:
		return "escalate_after_minutes"
	case tools.SettingEscalateTo:
		return "escalate_to_role"
	}
	return setting
}

// Pinned are the settings the policy file pins, by name (nil: none).
func (s *Service) Pinned() map[string]bool {
	p := s.pins.Load()
	if p == nil {
		return nil
	}
	return p.pinned
}

// keepsPinned reports whether next leaves the pinned setting as the file
// set it (false when it is not pinned).
func (s *Service) keepsPinned(next Settings, name string) bool {
	p := s.pins.Load()
	if p == nil || !p.pinned[name] {
		return false
	}
	v, err := settingJSON(next, name)
	return err == nil && bytes.Equal(v, p.values[name])
}

// checkPinned refuses a change to a setting the policy file pins, naming
// each field; nothing is saved.
func (s *Service) checkPinned(next Settings) error {
	p := s.pins.Load()
	if p == nil {
		return nil
	}
	var fields []apperr.FieldError
	var names []string
	for _, n := range tools.SettingNames {
		if p.pinned[n] && !s.keepsPinned(next, n) {
			names = append(names, n)
			fields = append(fields, apperr.FieldError{Field: formField(n), Message: "is set in gatehouse.yaml (pinned): change it in the policy file"})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return apperr.Invalid(fmt.Sprintf("Nothing was saved: %s %s set in the policy file (gatehouse.yaml), which pins it; change it there.",
		strings.Join(names, ", "), map[bool]string{true: "is", false: "are"}[len(names) == 1]), fields...)
}
