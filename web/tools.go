package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

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
			Params: t.Params(), Contract: contractLines(t), Upstream: t.Upstream, UpstreamStatus: status[t.Name], Cheatsheet: t.Cheatsheet}
	}
	return render(c, http.StatusOK, views.ToolsPage(s.shell(c, "Tools", "tools"), items, upstreamItems(ups)))
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
	lines := [][2]string{
		{"Authority", string(c.Authority)}, {"Risk", string(c.Risk)}, {"Action class", class},
		{"Human approval", gating}, {"Idempotency key", idem}, {"Rate limits", strings.Join(limits, ", ")},
		{"Audit kept", duration(c.Retention)},
	}
	for _, k := range t.ConstraintsFor(tools.Workspace{}) {
		lines = append(lines, [2]string{"Constraint", k.Kind})
	}
	return lines
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
