package tools_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/tools"
)

func parseFile(t *testing.T, doc string) (*tools.PolicyFile, error) {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return tools.ParsePolicyFile([]byte(doc), r.Classes(), func(string) string { return "" })
}

func TestParsePolicyFile_SettingsAndWhichArePinned(t *testing.T) {
	t.Parallel()
	f, err := parseFile(t, `
settings:
  auto_approve_high_risk: false
  confirm_runs_high_risk: true
  internal_domains: ["@Example.com", example.com, corp.example.com.]
  webhook_allowlist: []
  rationale_min_length: 20
  rationale_mode: warn
  rationale_warn_until: 2030-01-31
  escalate_after: 30m
  escalate_to: admin
  approval_quorums: {finance-approver: 2}
  pinned: [auto_approve_high_risk, rationale_mode, escalate_after, escalate_to]
`)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Settings
	if s.AutoApproveHighRisk == nil || *s.AutoApproveHighRisk || s.ConfirmRunsHighRisk == nil || !*s.ConfirmRunsHighRisk {
		t.Errorf("high-risk settings: %v %v", s.AutoApproveHighRisk, s.ConfirmRunsHighRisk)
	}
	if !slices.Equal(s.InternalDomains, []string{"corp.example.com", "example.com"}) || s.WebhookAllowlist == nil || len(s.WebhookAllowlist) != 0 {
		t.Errorf("domains: %q %q", s.InternalDomains, s.WebhookAllowlist)
	}
	if *s.RationaleMinLength != 20 || s.RationaleMode != "warn" || !s.RationaleWarnUntil.Equal(time.Date(2030, 1, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("rationale: %d %s %v", *s.RationaleMinLength, s.RationaleMode, s.RationaleWarnUntil)
	}
	if *s.EscalateAfter != 30*time.Minute || *s.EscalateTo != "admin" || !maps.Equal(s.ApprovalQuorums, map[string]int{"finance-approver": 2}) {
		t.Errorf("approval rules: %v %v %v", *s.EscalateAfter, *s.EscalateTo, s.ApprovalQuorums)
	}
	if got := slices.Sorted(maps.Keys(s.Pinned)); !slices.Equal(got, []string{"auto_approve_high_risk", "escalate_after", "escalate_to", "rationale_mode"}) {
		t.Errorf("pinned: %v", got)
	}
	if len(s.Names()) != 9 || s.Lines["rationale_mode"] != 8 {
		t.Errorf("names %v, lines %v", s.Names(), s.Lines)
	}
	if empty, err := parseFile(t, "tools: {}\n"); err != nil || len(empty.Settings.Names()) != 0 {
		t.Errorf("a file without settings: %v %v", empty.Settings.Names(), err)
	}
}

func TestParsePolicyFile_ABadSettingNamesItsLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, doc, want string }{
		{"unknown setting", "settings:\n  auto_approve: true\n", `line 2: unknown key "auto_approve"`},
		{"not a bool", "settings:\n  auto_approve_high_risk: sometimes\n", "line 2"},
		{"short rationale", "settings:\n  rationale_min_length: 5\n", "line 2: settings: rationale_min_length must be 10 to 500"},
		{"bad mode", "settings:\n  rationale_mode: lax\n", "line 2: settings: rationale_mode must be strict or warn"},
		{"warn without end", "settings:\n  rationale_mode: warn\n", "line 2: settings: rationale_mode: warn needs rationale_warn_until"},
		{"end without warn", "settings:\n  rationale_mode: strict\n  rationale_warn_until: 2030-01-01\n", "line 3: settings: rationale_warn_until goes with"},
		{"bad date", "settings:\n  rationale_mode: warn\n  rationale_warn_until: soon\n", "line 3"},
		{"bad duration", "settings:\n  escalate_after: 90s\n  escalate_to: admin\n", "line 2: settings: escalate_after must be whole minutes"},
		{"after alone", "settings:\n  escalate_after: 30m\n", "line 2: settings: escalate_after needs escalate_to"},
		{"to alone", "settings:\n  escalate_to: admin\n", "line 2: settings: escalate_to needs escalate_after"},
		{"bad domain", "settings:\n  internal_domains: [\"not a domain\"]\n", "line 2: settings: internal_domains"},
		{"quorum of one", "settings:\n  approval_quorums: {finance: 1}\n", "line 2: settings: approval_quorums: the quorum of finance must be 2"},
		{"pinned unknown", "settings:\n  rationale_min_length: 20\n  pinned: [rationale]\n", `line 3: settings: pinned: "rationale" is not a setting`},
		{"pinned unset", "settings:\n  rationale_min_length: 20\n  pinned: [auto_approve_high_risk]\n", "line 3: settings: pinned: auto_approve_high_risk is pinned but not set"},
		{"pinned half a rule", "settings:\n  escalate_after: 30m\n  escalate_to: admin\n  pinned: [escalate_after]\n", "line 4: settings: pinned: escalate_after and escalate_to are one rule"},
		{"pinned the end date", "settings:\n  rationale_mode: warn\n  rationale_warn_until: 2030-01-01\n  pinned: [rationale_warn_until]\n", "line 4: settings: pinned: pin rationale_mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseFile(t, c.doc)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
