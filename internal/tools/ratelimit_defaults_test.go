package tools_test

import (
	"testing"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// A tool that names no rate limit gets its authority class's default (the
// four authority classes): about ten a minute per agent for
// write-non-idempotent, one a minute and fifty a day per workspace for
// irreversible; none for read and write-idempotent (see contract.go). A
// tool's own limits stand.
func TestRateLimits_ClassDefaultsWhereAToolNamesNone(t *testing.T) {
	t.Parallel()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]tools.RateLimits{
		"records.get":         {},
		"records.search":      {},
		"records.put":         {},
		"notes.append":        {PerAgentPerMinute: 10},
		"records.delete":      {PerAgentPerMinute: 1, PerWorkspacePerDay: 50},
		"records.bulk_delete": {PerAgentPerMinute: 1, PerWorkspacePerDay: 50},
		"payment.initiate":    {PerAgentPerMinute: 1, PerWorkspacePerDay: 50},
		"email.send":          {PerAgentPerMinute: 10, PerWorkspacePerHour: 100, PerWorkspacePerDay: 500}, // its own
		"webhook.post":        {PerAgentPerMinute: 30},                                                    // its own
	} {
		tool, ok := r.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		if got := tool.Contract.RateLimits; got != want {
			t.Errorf("%s: rate limits %+v, want %+v", name, got, want)
		}
	}
}
