package tools

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FileSettings are the policy file's settings: section: the workspace
// settings of /admin/settings the file sets, for every workspace. A
// setting the file names and pins is enforced from the file (the UI shows
// it read-only and refuses a change); one it names without pinning is a
// default, written when the file introduces or changes it, which the UI
// may change afterwards (internal/settings, ApplyFile). A nil field is a
// setting the file does not name.
type FileSettings struct {
	AutoApproveHighRisk *bool
	ConfirmRunsHighRisk *bool
	// InternalDomains and WebhookAllowlist are lower case, sorted, without
	// repeats (as the settings page stores them).
	InternalDomains  []string
	WebhookAllowlist []string
	// RationaleMinLength is 10 to 500.
	RationaleMinLength *int
	// RationaleMode is strict or warn; RationaleWarnUntil ends warn mode
	// (required with it, a date: strict again by itself from then; a date
	// past is allowed, so that the file does not go bad with time).
	RationaleMode      string
	RationaleWarnUntil *time.Time
	// EscalateAfter (whole minutes, 0: never) and EscalateTo (a role) are
	// the rule for approval packets nobody resolves.
	EscalateAfter *time.Duration
	EscalateTo    *string
	// ApprovalQuorums: a role's packets need that many distinct approvers
	// (2 to MaxQuorum); non-nil (maybe empty) when the file names them.
	ApprovalQuorums map[string]int
	// Pinned are the settings the file enforces, by name.
	Pinned map[string]bool
	// Lines are where each setting is, by name.
	Lines map[string]int
}

// Setting names, as the settings: section, the settings page's fields and
// the audit log name them.
const (
	SettingAutoApproveHighRisk = "auto_approve_high_risk"
	SettingConfirmRunsHighRisk = "confirm_runs_high_risk"
	SettingInternalDomains     = "internal_domains"
	SettingWebhookAllowlist    = "webhook_allowlist"
	SettingRationaleMinLength  = "rationale_min_length"
	SettingRationaleMode       = "rationale_mode"
	SettingEscalateAfter       = "escalate_after"
	SettingEscalateTo          = "escalate_to"
	SettingApprovalQuorums     = "approval_quorums"
)

// SettingNames lists every setting the file may set and pin.
var SettingNames = []string{SettingAutoApproveHighRisk, SettingConfirmRunsHighRisk, SettingInternalDomains, SettingWebhookAllowlist,
	SettingRationaleMinLength, SettingRationaleMode, SettingEscalateAfter, SettingEscalateTo, SettingApprovalQuorums}

// Names are the settings the file names, in SettingNames' order.
func (fs FileSettings) Names() []string {
	var out []string
	for _, n := range SettingNames {
		if _, ok := fs.Lines[n]; ok {
			out = append(out, n)
		}
	}
	return out
}

// Sets reports whether the file names the setting.
func (fs FileSettings) Sets(name string) bool {
	_, ok := fs.Lines[name]
	return ok
}

// domainName is a host name as the settings page takes it.
var domainName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

// maxSettingDomains bounds a list of domains (as the settings page does).
const maxSettingDomains = 100

// parseSettings reads the settings: section; every error names its line.
func parseSettings(n *yaml.Node) (FileSettings, error) {
	fs := FileSettings{Pinned: map[string]bool{}, Lines: map[string]int{}}
	if err := checkKeys(n, append(slices.Clone(SettingNames), "rationale_warn_until", "pinned")...); err != nil {
		return fs, err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value != "pinned" && k.Value != "rationale_warn_until" {
			fs.Lines[k.Value] = k.Line
		}
		var err error
		switch k.Value {
		case SettingAutoApproveHighRisk, SettingConfirmRunsHighRisk:
			var b bool
			if b, err = decodeAs[bool](v, k.Value); err == nil {
				if k.Value == SettingAutoApproveHighRisk {
					fs.AutoApproveHighRisk = &b
				} else {
					fs.ConfirmRunsHighRisk = &b
				}
			}
		case SettingInternalDomains, SettingWebhookAllowlist:
			var list []string
			if list, err = settingDomains(v, k.Value); err == nil {
				if k.Value == SettingInternalDomains {
					fs.InternalDomains = list
				} else {
					fs.WebhookAllowlist = list
				}
			}
		case SettingRationaleMinLength:
			var l int
			if l, err = decodeAs[int](v, k.Value); err == nil {
				if l < 10 || l > 500 {
					return fs, lineError(v, "settings: rationale_min_length must be 10 to 500 characters")
				}
				fs.RationaleMinLength = &l
			}
		case SettingRationaleMode:
			if fs.RationaleMode, err = decodeAs[string](v, k.Value); err == nil && fs.RationaleMode != "strict" && fs.RationaleMode != "warn" {
				return fs, lineError(v, "settings: rationale_mode must be strict or warn")
			}
		case "rationale_warn_until":
			var s string
			if s, err = decodeAs[string](v, k.Value); err == nil {
				// A date, as the settings page takes it: warn mode ends as
				// the day begins (00:00 UTC).
				t, perr := time.Parse(time.DateOnly, s)
				if perr != nil {
					return fs, lineError(v, "settings: rationale_warn_until must be a date (2006-01-02)")
				}
				fs.RationaleWarnUntil = &t
			}
		case SettingEscalateAfter:
			var s string
			if s, err = decodeAs[string](v, k.Value); err == nil {
				d, perr := time.ParseDuration(s)
				if s == "0" || s == "never" {
					d, perr = 0, nil
				}
				if perr != nil || d < 0 || d > MaxEscalateAfter || d%time.Minute != 0 {
					return fs, lineError(v, "settings: escalate_after must be whole minutes up to %s, like 30m or 2h, or 0 (never)", MaxEscalateAfter)
				}
				fs.EscalateAfter = &d
			}
		case SettingEscalateTo:
			var s string
			if s, err = decodeAs[string](v, k.Value); err == nil {
				if !RoleName.MatchString(s) {
					return fs, lineError(v, "settings: escalate_to %q is not a role name (lower case letters, digits and dashes)", s)
				}
				fs.EscalateTo = &s
			}
		case SettingApprovalQuorums:
			var q map[string]int
			if q, err = decodeAs[map[string]int](v, k.Value); err == nil {
				if q == nil {
					q = map[string]int{}
				}
				for role, k := range q {
					if !RoleName.MatchString(role) {
						return fs, lineError(v, "settings: approval_quorums: %q is not a role name (lower case letters, digits and dashes)", role)
					}
					if k < 2 || k > MaxQuorum {
						return fs, lineError(v, "settings: approval_quorums: the quorum of %s must be 2 to %d approvers", role, MaxQuorum)
					}
				}
				fs.ApprovalQuorums = q
			}
		}
		if err != nil {
			return fs, err
		}
	}
	if v := valueOf(n, "rationale_warn_until"); v != nil && fs.RationaleMode != "warn" {
		return fs, lineError(v, "settings: rationale_warn_until goes with rationale_mode: warn")
	}
	if fs.RationaleMode == "warn" && fs.RationaleWarnUntil == nil {
		return fs, lineError(valueOf(n, SettingRationaleMode), "settings: rationale_mode: warn needs rationale_warn_until, the date it ends")
	}
	switch {
	case fs.EscalateAfter != nil && *fs.EscalateAfter > 0 && fs.EscalateTo == nil:
		return fs, lineError(valueOf(n, SettingEscalateAfter), "settings: escalate_after needs escalate_to, the role packets go to")
	case fs.EscalateTo != nil && (fs.EscalateAfter == nil || *fs.EscalateAfter == 0):
		return fs, lineError(valueOf(n, SettingEscalateTo), "settings: escalate_to needs escalate_after, how long a packet waits first")
	}
	if v := valueOf(n, "pinned"); v != nil {
		names, err := decodeAs[[]string](v, "pinned")
		if err != nil {
			return fs, err
		}
		for _, name := range names {
			switch {
			case name == "rationale_warn_until":
				return fs, lineError(v, "settings: pinned: pin rationale_mode (its rationale_warn_until goes with it)")
			case !slices.Contains(SettingNames, name):
				return fs, lineError(v, "settings: pinned: %q is not a setting (expected one of %s)", name, strings.Join(SettingNames, ", "))
			case !fs.Sets(name):
				return fs, lineError(v, "settings: pinned: %s is pinned but not set: give it a value in settings", name)
			case fs.Pinned[name]:
				return fs, lineError(v, "settings: pinned: %s is listed twice", name)
			}
			fs.Pinned[name] = true
		}
		if fs.Pinned[SettingEscalateAfter] != fs.Pinned[SettingEscalateTo] && fs.Sets(SettingEscalateTo) {
			return fs, lineError(v, "settings: pinned: escalate_after and escalate_to are one rule: pin both or neither")
		}
	}
	return fs, nil
}

// settingDomains reads a list of domains: lower case, a leading "@" and a
// trailing dot dropped, sorted, without repeats.
func settingDomains(v *yaml.Node, name string) ([]string, error) {
	raw, err := decodeAs[[]string](v, name)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, d := range raw {
		d = strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(d)), "@"), ".")
		if len(d) > 253 || !domainName.MatchString(d) {
			return nil, lineError(v, "settings: %s: %q is not a domain", name, d)
		}
		out = append(out, d)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxSettingDomains {
		return nil, lineError(v, "settings: %s: at most %d domains", name, maxSettingDomains)
	}
	return out, nil
}

// String says which settings the file sets and pins, for `policy check`.
func (fs FileSettings) String() string {
	names := fs.Names()
	if len(names) == 0 {
		return "no settings"
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n
		if fs.Pinned[n] {
			parts[i] += " (pinned)"
		}
	}
	return fmt.Sprintf("settings %s", strings.Join(parts, ", "))
}
