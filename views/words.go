package views

import "strings"

// Words for the values the database stores: pages say what a state means,
// never its internal name. One table, so every page agrees.

var statusWords = map[string]string{
	"pending":          "waiting for you",
	"pending_approval": "waiting for an approver",
	"applying":         "running",
	"applied":          "done",
	"rejected":         "rejected",
	"failed":           "failed",
	"expired":          "expired",
	"approved":         "approved",
}

var effectWords = map[string]string{
	"read":        "reads",
	"mutate":      "changes data",
	"destructive": "destroys data",
}

var riskWords = map[string]string{
	"low":    "low risk",
	"medium": "medium risk",
	"high":   "high risk",
}

var decisionWords = map[string]string{
	"allowed":                  "allowed",
	"allowed_with_constraints": "allowed with constraints",
	"review_required":          "needs the owner",
	"deferred":                 "needs an approver",
	"human_only":               "a person must do it",
	"blocked":                  "blocked",
}

// StatusWords is a proposal's or packet's status in words.
func StatusWords(s string) string { return lookup(statusWords, s) }

// EffectWords is a tool's effect in words.
func EffectWords(s string) string { return lookup(effectWords, s) }

// RiskWords is a contract's risk in words.
func RiskWords(s string) string { return lookup(riskWords, s) }

// DecisionWords is a decision state in words.
func DecisionWords(s string) string { return lookup(decisionWords, s) }

func lookup(m map[string]string, s string) string {
	if w, ok := m[s]; ok {
		return w
	}
	return strings.ReplaceAll(s, "_", " ")
}
