package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// slaPhases are the phases that call one built-in tool each, by the tool.
var slaPhases = []struct{ phase, tool string }{
	{"records.search, auto-run", "records.search"},
	{"records.get, auto-run", "records.get"},
	{"records.put, auto-apply, one conversation", "records.put"},
	{"records.put, auto-apply, single client", "records.put"},
}

// slaVerdicts compares each such phase's p95 and share of wanted answers
// with what its tool's contract states.
func (rep *report) slaVerdicts() []string {
	registry, err := tools.Builtin()
	if err != nil {
		return []string{"the built-in tools did not load: " + err.Error()}
	}
	byName := map[string]row{}
	for _, r := range rep.phases {
		byName[r.Name] = r
	}
	var out []string
	for _, p := range slaPhases {
		r, ok := byName[p.phase]
		tool, known := registry.Get(p.tool)
		if !ok || !known || r.Calls == 0 {
			continue
		}
		out = append(out, slaVerdict(p.tool, tool.Contract.SLA, r))
	}
	return out
}

// slaVerdict says how one phase kept its tool's stated service level.
func slaVerdict(name string, sla tools.SLA, r row) string {
	var parts []string
	if sla.P95Latency > 0 {
		verdict := "within"
		if r.P95 > sla.P95Latency {
			verdict = "over"
		}
		parts = append(parts, fmt.Sprintf("p95 %s against the stated %s (%s)", fmtDur(r.P95), fmtDur(sla.P95Latency), verdict))
	}
	if sla.Availability != "" {
		share := 100 * float64(r.OK) / float64(r.Calls)
		verdict := "within"
		if want, err := strconv.ParseFloat(strings.TrimSuffix(sla.Availability, "%"), 64); err == nil && share < want {
			verdict = "under"
		}
		parts = append(parts, fmt.Sprintf("%.2f %% of %d calls answered as wanted against the stated %s (%s)", share, r.Calls, sla.Availability, verdict))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("`%s` (%s): states no service level", name, r.Name)
	}
	return fmt.Sprintf("`%s` (%s, %d clients): %s", name, r.Name, r.Clients, strings.Join(parts, "; "))
}
