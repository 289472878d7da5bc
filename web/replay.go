package web

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/views"
)

// The policy replay on an admin page: a candidate policy file decided
// over the workspace's recorded calls (internal/replay); the command line
// has the same as "gatehouse policy replay".

// replayPage handles "GET /admin/policy/replay" (admins): the form.
func (s *Server) replayPage(c echo.Context) error {
	if err := replay.Authorize(principal(c)); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.ReplayPage(s.shell(c, "Policy replay", "admin"), views.ReplayView{Period: "7d"}))
}

// runReplay handles "POST /admin/policy/replay" (admins): replay the
// pasted file over the admin's workspace and show the report; a bad file
// or period re-renders the form with each error (422). It writes nothing.
func (s *Server) runReplay(c echo.Context) error {
	text, period := c.FormValue("policy"), c.FormValue("period")
	v := views.ReplayView{Policy: text, Period: period}
	svc := replay.NewService(s.pool, s.registry)
	r, err := svc.ReplayWorkspace(c.Request().Context(), principal(c), text, period, time.Now())
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.EINVALID {
		v.Error = ae.Message
		for _, f := range ae.Fields {
			switch f.Field {
			case "policy":
				v.PolicyErrors = append(v.PolicyErrors, f.Message)
			case "period":
				v.PeriodError = f.Message
			}
		}
		return render(c, http.StatusUnprocessableEntity, views.ReplayPage(s.shell(c, "Policy replay", "admin"), v))
	}
	if err != nil {
		return err
	}
	rv := replayReportView(r)
	v.Report = &rv
	return render(c, http.StatusOK, views.ReplayPage(s.shell(c, "Policy replay", "admin"), v))
}

// replayReportView is the page's view of a report: the groups whose calls
// would change, each example linked to its audit trail.
func replayReportView(r replay.Report) views.ReplayReportView {
	t := r.Totals
	v := views.ReplayReportView{
		Since: r.Since.UTC().Format(time.RFC3339), Until: r.Until.UTC().Format(time.RFC3339),
		Calls: t.Calls + r.Unreadable, Covered: r.Covered, NotCovered: r.NotCovered, Unreadable: r.Unreadable,
		Changed: t.Of(replay.Changed), NewlyAsks: t.NewlyAsks, NewlyAllowed: t.NewlyAllowed, Destructive: t.NewlyAllowedDestructive,
		NewlyBlocked: t.NewlyBlocked, Restated: t.Restated, Saved: t.ApprovalsSaved, Cost: t.ApprovalsCost, Overruled: t.Overruled,
		NoAnnotations: strings.Join(r.NoAnnotations, ", "), StoppedEarly: r.StoppedEarly,
	}
	if r.ReadUntil != nil {
		v.ReadUntil = r.ReadUntil.UTC().Format(time.RFC3339)
	} else {
		v.ReadUntil = v.Since
	}
	for _, g := range r.Groups {
		if g.Of(replay.Changed) == 0 {
			continue
		}
		gv := views.ReplayGroupView{Tool: g.Tool, ActionClass: g.ActionClass, Calls: g.Calls, NewlyAsks: g.NewlyAsks, NewlyAllowed: g.NewlyAllowed,
			Destructive: g.NewlyAllowedDestructive, NewlyBlocked: g.NewlyBlocked, Restated: g.Restated, Saved: g.ApprovalsSaved, Cost: g.ApprovalsCost}
		for _, k := range replay.Kinds {
			for _, ex := range g.Examples[k] {
				gv.Examples = append(gv.Examples, views.ReplayExampleView{Kind: string(k), ID: ex.ID.String(), Before: string(ex.Before),
					After: string(ex.After), Status: ex.Status, URL: "/audit?object=" + ex.ID.String()})
			}
		}
		v.Groups = append(v.Groups, gv)
	}
	return v
}
