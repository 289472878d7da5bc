package web_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policyfile"
)

// shadowFile holds records.put above an amount for an approver, in shadow
// mode: not enforced.
const shadowFile = `tools:
  records.put:
    rate_limits: {per_agent_per_minute: 1000, per_workspace_per_hour: 100000, per_workspace_per_day: 100000}
    threshold: "value.amount > 100"
    mode: shadow
`

// TestShadowRules_RecordWhatTheyWouldHaveDecidedAndArePromotedByAReload:
// a shadow rule that raises records.put's bar leaves its calls applied at
// once, records in each call's audit row that it would have asked an
// approver, and /admin/policy counts them (folded or not); removing mode:
// shadow enforces it.
func TestShadowRules_RecordWhatTheyWouldHaveDecidedAndArePromotedByAReload(t *testing.T) {
	t.Parallel()
	r := newReloadEnv(t, shadowFile)
	admin := r.user("admin@example.com", auth.RoleAdmin)
	token := r.token("admin@example.com", auth.TokenUser)
	_, conv := r.api("POST", "/api/v1/conversations", token, map[string]any{"title": "Invoices"})
	id := conv["id"].(string)
	if resp, out := r.api("PATCH", "/api/v1/conversations/"+id, token, map[string]any{"permission_mode": "auto"}); resp.StatusCode != 200 {
		t.Fatalf("auto mode: %d %v", resp.StatusCode, out)
	}
	put := func(key string, amount int) int {
		resp, out := r.api("POST", "/api/v1/conversations/"+id+"/tool-calls", token, map[string]any{"tool": "records.put", "rationale": "record the invoice the customer sent",
			"arguments": map[string]any{"collection": "invoices", "key": key, "value": map[string]any{"amount": amount}}})
		if resp.StatusCode != 200 && resp.StatusCode != 202 {
			t.Fatalf("records.put %s: %d %v", key, resp.StatusCode, out)
		}
		return resp.StatusCode
	}
	for i, amount := range []int{500, 50, 700, 900} {
		if status := put(fmt.Sprintf("inv-%d", i), amount); status != 200 {
			t.Fatalf("a call under a shadow rule waited (%d)", status)
		}
	}
	tool, _ := r.registry.Get("records.put")
	// The calls ran at once: their one audit row carries the verdict.
	if n := r.count(`SELECT count(*) FROM audit_events WHERE action = 'proposal.applied' AND data->'shadow'->>'rule' = $1
		AND data->'shadow'->>'state' = 'deferred' AND data->'shadow'->>'kind' = 'newly-asks' AND data->>'state' = 'allowed'`, tool.ShadowRule); n != 3 {
		t.Fatalf("%d calls record the rule's verdict, want 3 (the small one decides alike)", n)
	}
	shown := func() string {
		_, page := admin.get("/admin/policy")
		row := regexp.MustCompile(`(?s)<tr data-testid="shadow-rule" data-tool="records.put".*?</tr>`).FindString(page)
		if row == "" {
			t.Fatalf("/admin/policy shows no rule for records.put:\n%s", page)
		}
		return row
	}
	if row := shown(); !strings.Contains(row, `data-testid="shadow-newly-asks">3<`) || !strings.Contains(row, "threshold none → value.amount &gt; 100") {
		t.Fatalf("the rule's counts before the roll-up:\n%s", row)
	}
	// Folded by the roll-up: the same count, from shadow_counts.
	for range 10 {
		if _, err := policyfile.RollUpShadow(context.Background(), r.pool); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.count(`SELECT coalesce(sum(calls), 0)::int FROM shadow_counts WHERE rule = $1 AND kind = 'newly-asks'`, tool.ShadowRule); n != 3 {
		t.Fatalf("the roll-up folded %d", n)
	}
	if row := shown(); !strings.Contains(row, `data-testid="shadow-newly-asks">3<`) {
		t.Fatalf("the rule's counts after the roll-up:\n%s", row)
	}

	// Promoted: the rule is enforced from the reload on.
	if err := r.reload(strings.Replace(shadowFile, "    mode: shadow\n", "", 1)); err != nil {
		t.Fatal(err)
	}
	if status := put("inv-9", 500); status != 202 {
		t.Fatalf("the promoted rule is not enforced: %d", status)
	}
	if _, page := admin.get("/admin/policy"); !strings.Contains(page, `data-testid="no-shadow-rules"`) {
		t.Fatalf("a promoted rule is still shown in shadow mode:\n%s", page)
	}
}
