package tools_test

import (
	"slices"
	"testing"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// adrRule is one of ADR-036's tagging rules (Decision 3), with the risk it
// gives.
type adrRule struct {
	name string
	risk policy.Risk
}

// ADR-036's rules, in the words of the ADR.
var (
	ruleReadOnly          = adrRule{"low: read-only operations", policy.RiskLow}
	ruleInternalWrite     = adrRule{"medium: write operations on internal records", policy.RiskMedium}
	ruleFinancial         = adrRule{"high: financial operations", policy.RiskHigh}
	ruleDestructive       = adrRule{"high: destructive operations", policy.RiskHigh}
	ruleExternalMessaging = adrRule{"high: external-messaging operations", policy.RiskHigh}
)

// ruleFor is the rule a tool falls under by what its declaration says it
// does, the strictest first: a payment class is financial; a destructive
// effect or an irreversible authority class is destructive; a class that
// reaches outside the workspace (mail, webhooks) is external messaging; a
// read is read-only; anything else writes the workspace's own records.
func ruleFor(t *tools.Tool, classes *policy.ClassRegistry) adrRule {
	reach := slices.Clone(t.Contract.ActionClasses)
	if t.Contract.ActionClass != "" {
		reach = append(reach, t.Contract.ActionClass)
	}
	outside := false
	for _, class := range reach {
		if class == "payment.initiate" {
			return ruleFinancial
		}
		group, _ := classes.Group(class)
		outside = outside || group == policy.GroupExternal || group == policy.GroupExternalControlled
	}
	switch {
	case t.Effect == policy.EffectDestructive || t.Contract.Authority == policy.AuthorityIrreversible:
		return ruleDestructive
	case outside:
		return ruleExternalMessaging
	case t.Effect == policy.EffectRead:
		return ruleReadOnly
	}
	return ruleInternalWrite
}

// Every built-in tool's risk is the one ADR-036's rules give it, and the
// table cites the rule: a change that lowers a rating (records.delete,
// records.bulk_delete and webhook.post were medium) fails here, and so
// does a new built-in tool until it is rated in this table.
func TestBuiltinRisk_FollowsADR036(t *testing.T) {
	reg, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool string
		risk policy.Risk
		rule adrRule
	}{
		{"records.search", policy.RiskLow, ruleReadOnly},
		{"records.get", policy.RiskLow, ruleReadOnly},
		{"records.put", policy.RiskMedium, ruleInternalWrite},
		{"notes.append", policy.RiskMedium, ruleInternalWrite},
		{"records.delete", policy.RiskHigh, ruleDestructive},
		{"records.bulk_delete", policy.RiskHigh, ruleDestructive},
		{"email.send", policy.RiskHigh, ruleExternalMessaging},
		{"webhook.post", policy.RiskHigh, ruleExternalMessaging},
		{"payment.initiate", policy.RiskHigh, ruleFinancial},
	}
	rated := map[string]bool{}
	for _, tc := range cases {
		rated[tc.tool] = true
		t.Run(tc.tool, func(t *testing.T) {
			tool, ok := reg.Get(tc.tool)
			if !ok {
				t.Fatalf("%s is not a built-in tool", tc.tool)
			}
			if tc.rule.risk != tc.risk {
				t.Fatalf("the table rates %s %s but cites %q", tc.tool, tc.risk, tc.rule.name)
			}
			if got := ruleFor(tool, reg.Classes()); got != tc.rule {
				t.Errorf("%s falls under ADR-036's %q by its declaration, the table cites %q", tc.tool, got.name, tc.rule.name)
			}
			if tool.Contract.Risk != tc.risk {
				t.Errorf("%s is %s risk; ADR-036's %q makes it %s", tc.tool, tool.Contract.Risk, tc.rule.name, tc.risk)
			}
		})
	}
	for _, tool := range reg.List() {
		if !rated[tool.Name] {
			t.Errorf("built-in tool %s has no row here: rate it by ADR-036's rules and cite the rule", tool.Name)
		}
	}
}
