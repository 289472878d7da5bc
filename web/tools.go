package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/views"
)

// toolsPage handles "GET /tools".
func (s *Server) toolsPage(c echo.Context) error {
	list := s.props.Tools()
	ups, err := s.upstreams.Status(c.Request().Context())
	if err != nil {
		return err
	}
	status := map[string]string{}
	for _, u := range ups {
		for _, t := range u.Tools {
			status[t.Declared] = t.Status
		}
	}
	items := make([]views.ToolItem, len(list))
	for i, t := range list {
		var schema bytes.Buffer
		if err := json.Indent(&schema, t.Schema, "", "  "); err != nil {
			return err
		}
		items[i] = views.ToolItem{Name: t.Name, Description: t.Description, Effect: string(t.Effect), Schema: schema.String(),
			Params: t.Params(), Contract: contractLines(t), Upstream: t.Upstream, UpstreamStatus: status[t.Name], Cheatsheet: t.Cheatsheet,
			Holds: holdLines(t), ClassRationale: t.Contract.ClassRationale}
	}
	return render(c, http.StatusOK, views.ToolsPage(s.shell(c, "Tools", "tools"), items, upstreamItems(ups)))
}

// holdLines say which layers stricter than the conversation's mode or the
// notebook's trust level hold a call to this tool, so the page never
// promises that a setting runs it (docs/policy.md, "One decision, in
// layers that only tighten").
func holdLines(t *tools.Tool) []string {
	c := t.Contract
	var out []string
	classes := append([]string{c.ActionClass}, c.ActionClasses...)
	for _, class := range classes {
		if g, ok := policy.DefaultClasses().Group(class); ok && g == policy.GroupHumanOnly {
			out = append(out, fmt.Sprintf("Action class %s is human-only: no setting runs it; an agent's call waits for its owner to perform it and record it.", class))
			break
		}
	}
	switch {
	case c.Gating.Required:
		out = append(out, fmt.Sprintf("Always waits for an approver with the %s role, whatever the mode or trust level.", c.Gating.ApproverRole))
	case c.Gating.Threshold != "":
		out = append(out, fmt.Sprintf("Waits for an approver with the %s role when %s, whatever the mode or trust level.", c.Gating.ApproverRole, c.Gating.Threshold))
	}
	if c.Risk == policy.RiskHigh {
		out = append(out, "High risk: waits for an approver unless an admin lets the workspace auto-approve high-risk calls.")
	}
	if slices.ContainsFunc(c.Constraints, func(k policy.Constraint) bool { return k.Kind == policy.ConstraintRequiresWitness }) {
		out = append(out, "Requires a witness: two approvers other than the proposer and the owner.")
	}
	return out
}

// contractLines says what a tool's contract means, line by line.
func contractLines(t *tools.Tool) [][2]string {
	c := t.Contract
	class := c.ActionClass
	if class == "" {
		class = strings.Join(c.ActionClasses, " or ") + " (from the arguments)"
	}
	gating := "no"
	switch {
	case c.Gating.Required:
		gating = fmt.Sprintf("always, by the %s role, within %s", c.Gating.ApproverRole, duration(c.Gating.Window))
	case c.Gating.Threshold != "":
		gating = fmt.Sprintf("when %s, by the %s role, within %s", c.Gating.Threshold, c.Gating.ApproverRole, duration(c.Gating.Window))
	case c.Gating.NotGatedReason != "":
		gating = "no: " + c.Gating.NotGatedReason
	}
	idem := "optional"
	if c.Idempotency.Required {
		idem = "required"
	}
	idem += fmt.Sprintf(", remembered %s", duration(c.Idempotency.Window))
	if len(c.Idempotency.KeyFields) > 0 {
		idem += "; naturally keyed by " + strings.Join(c.Idempotency.KeyFields, " + ")
	}
	var limits []string
	for _, l := range []struct {
		n    int
		unit string
	}{{c.RateLimits.PerAgentPerMinute, "per caller per minute"}, {c.RateLimits.PerWorkspacePerHour, "per workspace per hour"}, {c.RateLimits.PerWorkspacePerDay, "per workspace per day"}} {
		if l.n > 0 {
			limits = append(limits, fmt.Sprintf("%d %s", l.n, l.unit))
		}
	}
	if len(limits) == 0 {
		limits = []string{"none"}
	}
	pii := "none declared"
	if len(c.PIIFields) > 0 {
		pii = strings.Join(c.PIIFields, ", ") + " (redacted in the audit export; a read records which it read)"
	}
	lines := [][2]string{
		{"Authority", string(c.Authority)}, {"Undoing it", c.Reversibility},
		{"Risk", string(c.Risk)}, {"Action class", class},
		{"Human approval", gating}, {"Idempotency key", idem}, {"Rate limits", strings.Join(limits, ", ")},
		{"Audit kept", duration(c.Retention)}, {"Personal data", pii}, {"Service level", slaLine(c.SLA)},
	}
	for _, k := range t.ConstraintsFor(tools.Workspace{}) {
		lines = append(lines, [2]string{"Constraint", k.Kind})
	}
	return lines
}

// slaLine says a tool's stated service level.
func slaLine(sla tools.SLA) string {
	var parts []string
	if sla.P95Latency > 0 {
		parts = append(parts, fmt.Sprintf("95%% of calls within %s", sla.P95Latency))
	}
	if sla.Availability != "" {
		parts = append(parts, sla.Availability+" available")
	}
	if len(parts) == 0 {
		return "not stated"
	}
	return strings.Join(parts, "; ")
}

// duration says a contract's duration in days or hours.
func duration(d time.Duration) string {
	switch {
	case d >= 365*24*time.Hour && d%(365*24*time.Hour) == 0:
		return fmt.Sprintf("%d years", d/(365*24*time.Hour))
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	default:
		return d.String()
	}
}
