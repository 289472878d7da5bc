package tools_test

import (
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// A tool that names no rate limit gets its authority class's default (the
// four authority classes): 120 a minute per agent for reads, 60 for
// write-idempotent, ten for write-non-idempotent, one a minute and fifty a
// day per workspace for irreversible (see contract.go). A tool's own
// limits stand.
func TestRateLimits_ClassDefaultsWhereAToolNamesNone(t *testing.T) {
	t.Parallel()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]tools.RateLimits{
		"records.get":         {PerAgentPerMinute: 120},
		"records.search":      {PerAgentPerMinute: 120},
		"records.put":         {PerAgentPerMinute: 60},
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

// The in-database built-in tools state their service level; the ones
// whose time is someone else's state none.
func TestBuiltin_StatedServiceLevels(t *testing.T) {
	t.Parallel()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{
		"records.get": 50 * time.Millisecond, "records.put": 50 * time.Millisecond, "notes.append": 50 * time.Millisecond,
		"records.delete": 50 * time.Millisecond, "records.search": 100 * time.Millisecond, "records.bulk_delete": 250 * time.Millisecond,
		"email.send": 0, "webhook.post": 0, "payment.initiate": 0,
	} {
		tool, ok := r.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		sla := tool.Contract.SLA
		if sla.P95Latency != want || (want > 0) != (sla.Availability == "99.9%") {
			t.Errorf("%s: SLA %+v, want p95 %v", name, sla, want)
		}
	}
}
