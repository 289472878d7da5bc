package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/trust"
	"github.com/gatehouse/gatehouse/views"
)

// trustPage handles "GET /trust" (signed-in users): each class's
// posterior, the evidence behind it, the open violations, and the
// approval-fatigue numbers per class and tool.
func (s *Server) trustPage(c echo.Context) error {
	var notice string
	switch {
	case c.QueryParam("saved") == "1":
		notice = "The threshold is set. The change is in the audit log."
	case c.QueryParam("cleared") == "1":
		notice = "The violation is cleared; its class is no longer suspended. The change is in the audit log."
	}
	return s.renderTrust(c, http.StatusOK, trustState{notice: notice})
}

// trustState is what a re-rendered /trust page keeps of a refused form.
type trustState struct {
	notice, errMsg string
	form           *views.ThresholdForm
	// clearing is the violation whose clear form was refused, its note and
	// the message.
	clearing, note, noteError string
}

func (s *Server) renderTrust(c echo.Context, status int, st trustState) error {
	p := principal(c)
	o, err := s.trust.Overview(c.Request().Context(), p)
	if err != nil {
		return err
	}
	now := time.Now()
	f, err := s.trust.Fatigue(c.Request().Context(), p, now, s.toolKind)
	if err != nil {
		return err
	}
	v := toTrustView(o, p, now)
	v.Fatigue = toFatigueView(f, v)
	v.Updating = v.Updating || f.Updating
	v.Notice, v.Error = st.notice, st.errMsg
	if v.Thresholds != nil && st.form != nil {
		st.form.Classes = v.Thresholds.Classes
		v.Thresholds = st.form
	}
	for i := range v.Violations {
		if v.Violations[i].ID == st.clearing {
			v.Violations[i].Note, v.Violations[i].NoteError = st.note, st.noteError
		}
	}
	return render(c, status, views.TrustPage(s.shell(c, "Trust", "trust"), v))
}

// setTrustThreshold handles "POST /trust/thresholds" (admins): a class's
// graduation threshold, from the /trust page's form.
func (s *Server) setTrustThreshold(c echo.Context) error {
	form := views.ThresholdForm{Class: c.FormValue("action_class"), CILow: strings.TrimSpace(c.FormValue("ci_low")),
		MinSamples: strings.TrimSpace(c.FormValue("min_samples")), Reason: c.FormValue("reason"), Fields: map[string]string{}}
	ciLow, err := strconv.ParseFloat(form.CILow, 64)
	if err != nil || math.IsNaN(ciLow) {
		form.Fields["ci_low"] = "must be a number between 0 and 1"
	}
	minSamples, err := strconv.Atoi(form.MinSamples)
	if err != nil {
		form.Fields["min_samples"] = "must be a whole number from 1 to 100000"
	}
	if len(form.Fields) == 0 {
		_, err := s.trust.SetThreshold(c.Request().Context(), principal(c), form.Class, trust.Threshold{CILow: ciLow, MinSamples: minSamples}, form.Reason)
		var ae *apperr.Error
		switch {
		case err == nil:
			return c.Redirect(http.StatusSeeOther, "/trust?saved=1#class-"+domID(form.Class))
		case errors.As(err, &ae) && ae.Code == apperr.EINVALID:
			for _, f := range ae.Fields {
				form.Fields[f.Field] = f.Message
			}
		case errors.As(err, &ae) && ae.Code == apperr.ENOTFOUND:
			form.Fields["action_class"] = "is not a known action class"
		default:
			return err
		}
	}
	return s.renderTrust(c, http.StatusUnprocessableEntity, trustState{errMsg: "The threshold was not changed; fix the fields below.", form: &form})
}

// clearViolation handles "POST /trust/violations/:id/clear": the
// principal (an admin, or whoever flagged it) clears a violation.
func (s *Server) clearViolation(c echo.Context) error {
	id, err := pathID(c, trust.ErrViolationNotFound)
	if err != nil {
		return err
	}
	note := c.FormValue("note")
	_, err = s.trust.ClearViolation(c.Request().Context(), principal(c), id, note)
	var ae *apperr.Error
	switch {
	case err == nil:
		return c.Redirect(http.StatusSeeOther, "/trust?cleared=1")
	case errors.As(err, &ae) && ae.Code == apperr.EINVALID:
		msg := ae.Message
		if len(ae.Fields) > 0 {
			msg = ae.Fields[0].Message
		}
		return s.renderTrust(c, http.StatusUnprocessableEntity, trustState{errMsg: ae.Message, clearing: id.String(), note: note, noteError: msg})
	}
	return err
}

// domID turns an action class into an element id.
func domID(class string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '-'
	}, strings.ToLower(class))
}

var tierText = map[trust.Tier]string{
	trust.TierNew:       "new: no evidence yet",
	trust.TierLearning:  "learning",
	trust.TierReady:     "ready: graduation recommended",
	trust.TierSuspended: "suspended: open violation",
}

var thresholdSource = map[string]string{
	"workspace": "set for this workspace",
	"class":     "this class's default",
	"default":   "the default",
}

// toTrustView turns the overview into the page's view model.
func toTrustView(o trust.Overview, p auth.Principal, now time.Time) views.TrustView {
	v := views.TrustView{Quiet: o.Quiet, Updating: o.Updating}
	for _, co := range o.Classes {
		post := co.Posterior
		cl := views.TrustClass{
			Class: post.ActionClass, DOMID: domID(post.ActionClass), Tier: string(post.Tier), TierText: tierText[post.Tier], Ready: post.GraduationReady,
			Samples: strconv.Itoa(post.Samples), Mean: fmt.Sprintf("%.3f", post.Mean), Interval: fmt.Sprintf("%.3f – %.3f (width %.3f)", post.CILow, post.CIHigh, post.CIWidth),
			Shape:     fmt.Sprintf("Beta(%s, %s)", trimFloat(post.Alpha), trimFloat(post.Beta)),
			Threshold: fmt.Sprintf("ci_low ≥ %s with ≥ %d samples", trimFloat(post.Threshold.CILow), post.Threshold.MinSamples), ThresholdSource: thresholdSource[co.ThresholdSource],
			ApprovalRate: "no judgments yet", MedianDecision: "no decisions in the last 90 days",
			Chart: densityChart(post),
		}
		if co.Judgments > 0 {
			cl.ApprovalRate = fmt.Sprintf("%.0f %% (%d of %d judgments approved as is or with a minor edit)", 100*float64(co.Approvals)/float64(co.Judgments), co.Approvals, co.Judgments)
		}
		if co.Decisions > 0 {
			cl.MedianDecision = fmt.Sprintf("%s (%d decided by a person in the last 90 days)", humanDuration(co.MedianDecision), co.Decisions)
		}
		for _, e := range co.Evidence {
			te := views.TrustEvidence{Label: string(e.Label), Weight: fmt.Sprintf("%+.3f", e.Weight), Provenance: string(e.Provenance), When: e.CreatedAt, Note: e.Note}
			switch {
			case e.ReceiptID != uuid.Nil:
				te.Link, te.LinkText = "/admin/receipts#"+e.ReceiptID.String(), "receipt "+e.ReceiptID.String()[:8]
			case e.ConversationID != uuid.Nil:
				te.Link, te.LinkText = "/conversations/"+e.ConversationID.String()+"#proposal-"+e.ProposalID.String(), "proposal "+e.ProposalID.String()[:8]
			case e.NotebookID != uuid.Nil:
				te.Link, te.LinkText = "/notebooks/"+e.NotebookID.String()+"#proposal-"+e.ProposalID.String(), "proposal "+e.ProposalID.String()[:8]
			}
			cl.Evidence = append(cl.Evidence, te)
		}
		v.Classes = append(v.Classes, cl)
	}
	for _, x := range o.OpenViolations {
		tv := views.TrustViolation{ID: x.ID.String(), Class: x.ActionClass, Category: string(x.Category), Reason: x.Reason, FlaggedBy: x.FlaggedByEmail,
			When: x.CreatedAt, MayClear: x.MayClear(p)}
		if tv.FlaggedBy == "" {
			tv.FlaggedBy = "a former member"
		}
		if x.ReceiptID != uuid.Nil {
			tv.ReceiptLink = "/admin/receipts#" + x.ReceiptID.String()
		}
		v.Violations = append(v.Violations, tv)
	}
	if o.CanSetThresholds {
		f := &views.ThresholdForm{Classes: o.KnownClasses, Fields: map[string]string{}, CILow: "0.8", MinSamples: "10"}
		if len(o.Classes) > 0 && slices.Contains(o.KnownClasses, o.Classes[0].Posterior.ActionClass) {
			th := o.Classes[0].Posterior.Threshold
			f.Class, f.CILow, f.MinSamples = o.Classes[0].Posterior.ActionClass, trimFloat(th.CILow), strconv.Itoa(th.MinSamples)
		}
		v.Thresholds = f
	}
	return v
}

// trimFloat writes f with at most four decimals and no trailing zeros.
func trimFloat(f float64) string { return strconv.FormatFloat(math.Round(f*1e4)/1e4, 'f', -1, 64) }

// humanDuration writes a wait as people say it: 42 s, 7 min, 3.5 h, 2.1 days.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.1f days", d.Hours()/24)
}

// The chart's size and margins, in SVG user units.
const (
	chartWidth  = 360.0
	chartHeight = 150.0
	chartLeft   = 12.0
	chartRight  = 12.0
	chartTop    = 22.0
	chartBottom = 22.0
	// chartPoints is how many intervals the density is sampled at.
	chartPoints = 100
)

// densityChart draws the posterior's density: the curve from ~100 points
// (plus the interval's ends, the mean and the mode, so a narrow peak is
// not cut), the 95 % interval shaded under it, and the threshold's ci_low
// as a labelled vertical line.
func densityChart(p trust.Posterior) views.TrustChart {
	plotW, plotH := chartWidth-chartLeft-chartRight, chartHeight-chartTop-chartBottom
	baseline := chartHeight - chartBottom
	pts := p.Density(chartPoints)
	mode := (p.Alpha - 1) / (p.Alpha + p.Beta - 2) // both shapes are at least 2
	for _, x := range []float64{p.CILow, p.CIHigh, p.Mean, mode} {
		pts = append(pts, trust.DensityPoint{X: x, Y: p.DensityAt(x)})
	}
	slices.SortFunc(pts, func(a, b trust.DensityPoint) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	})
	pts = slices.CompactFunc(pts, func(a, b trust.DensityPoint) bool { return a.X == b.X })
	top := 0.0
	for _, pt := range pts {
		top = max(top, pt.Y)
	}
	if top == 0 {
		top = 1
	}
	sx := func(x float64) float64 { return chartLeft + x*plotW }
	sy := func(y float64) float64 { return baseline - y/top*plotH }
	num := func(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

	var curve, band strings.Builder
	for i, pt := range pts {
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&curve, "%s%s %s ", cmd, num(sx(pt.X)), num(sy(pt.Y)))
	}
	fmt.Fprintf(&band, "M%s %s ", num(sx(p.CILow)), num(baseline))
	for _, pt := range pts {
		if pt.X >= p.CILow && pt.X <= p.CIHigh {
			fmt.Fprintf(&band, "L%s %s ", num(sx(pt.X)), num(sy(pt.Y)))
		}
	}
	fmt.Fprintf(&band, "L%s %s Z", num(sx(p.CIHigh)), num(baseline))

	th := p.Threshold.CILow
	c := views.TrustChart{
		ID:    "chart-" + domID(p.ActionClass),
		Title: fmt.Sprintf("%s: posterior Beta(%s, %s), mean %.3f, 95 %% interval %.3f to %.3f, threshold ci_low %s with %d samples; %d samples, %s.", p.ActionClass, trimFloat(p.Alpha), trimFloat(p.Beta), p.Mean, p.CILow, p.CIHigh, trimFloat(th), p.Threshold.MinSamples, p.Samples, p.Tier),
		Desc: fmt.Sprintf("The density of the posterior over the share of calls a person would approve, from 0 to 1. The shaded band is the 95 %% credible interval; the vertical line marks the threshold %s, which the interval's lower end %.3f %s.",
			trimFloat(th), p.CILow, map[bool]string{true: "reaches", false: "does not reach"}[p.CILow >= th]),
		Width: num(chartWidth), Height: num(chartHeight), Curve: strings.TrimSpace(curve.String()), Band: band.String(),
		Baseline: num(baseline), Left: num(chartLeft), Right: num(chartWidth - chartRight),
		ThresholdX: num(sx(th)), ThresholdTop: num(chartTop - 4), ThresholdLabel: "threshold " + trimFloat(th), ThresholdLabelX: num(sx(th)), ThresholdAnchor: "middle",
		LabelY: num(baseline - 4), IntervalMid: num(sx((p.CILow + p.CIHigh) / 2)), IntervalLabel: "95 %",
	}
	switch {
	case th > 0.8:
		c.ThresholdAnchor, c.ThresholdLabelX = "end", num(sx(th)+2)
	case th < 0.2:
		c.ThresholdAnchor, c.ThresholdLabelX = "start", num(sx(th)-2)
	}
	for _, x := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.Ticks = append(c.Ticks, views.ChartTick{X: num(sx(x)), Y: num(baseline + 15), Label: trimFloat(x)})
	}
	return c
}

// toolKind is what the registry declares of a tool, for whether its calls
// may be granted.
func (s *Server) toolKind(name string) (policy.Effect, policy.Authority, bool) {
	if s.registry == nil {
		return "", "", false
	}
	t, ok := s.registry.Get(name)
	if !ok {
		return "", "", false
	}
	return t.Effect, t.Contract.Authority, true
}

// fatiguePeriod and fatigueRule say on /trust what the numbers cover and
// when they suggest something.
func fatiguePeriod(f trust.Fatigue) string {
	return fmt.Sprintf("Over the last %d days: UTC days %s to %s, today included. A decision is a person's approval (on a confirm card or an approval packet) or rejection of a call, timed from the proposal; calls run automatically or under a grant are nobody's decision and are not counted.",
		trust.FatigueDays, f.From.Format(time.DateOnly), f.Until.AddDate(0, 0, -1).Format(time.DateOnly))
}

func fatigueRule() string {
	return fmt.Sprintf("The suggestion rule, from %d decisions: rejected in %.0f %% or more of them, tighten; otherwise approved as proposed (no edit) within %s in more than %.0f %% of them, re-tier the tool or grant its calls. The median is read from a histogram of decision times: approximate, to within about 10 %%.",
		trust.FatigueMinDecisions, 100*trust.FatigueRejectedShare, humanDuration(intent.FastApproval), 100*trust.FatigueFastShare)
}

// approxDuration writes a median read from the histogram: "≈ 42 s", or
// "< 1 s" for its first bucket.
func approxDuration(d time.Duration) string {
	if d < time.Second {
		return "< 1 s"
	}
	return "≈ " + humanDuration(d)
}

// percentOf writes n of total as "75 % (9 of 12)".
func percentOf(n, total int64) string {
	return fmt.Sprintf("%.0f %% (%d of %d)", 100*float64(n)/float64(max(total, 1)), n, total)
}

// toFatigueView turns the numbers into the page's table; v is the rest of
// the page, for the links a suggestion gives (the class's card, the
// admin's threshold form).
func toFatigueView(f trust.Fatigue, v views.TrustView) views.TrustFatigue {
	out := views.TrustFatigue{Period: fatiguePeriod(f), Rule: fatigueRule()}
	carded := map[string]bool{}
	for _, cl := range v.Classes {
		carded[cl.Class] = true
	}
	for _, t := range f.Tools {
		r := views.TrustFatigueRow{Class: t.ActionClass, Tool: t.Tool, Kind: string(t.Suggestion),
			Decided:   fmt.Sprintf("%d (%d approved, %d rejected)", t.Decisions, t.Approvals, t.Rejections),
			FastShare: percentOf(t.FastApprovals, t.Decisions), Median: approxDuration(t.MedianDecision),
			Rejected: percentOf(t.Rejections, t.Decisions)}
		contract := views.FatigueLink{Href: "/tools#tool-" + t.Tool, Text: "The tool's contract."}
		switch t.Suggestion {
		case trust.SuggestLessReview:
			r.Suggestion = fmt.Sprintf("Approved as proposed within %s in more than %.0f %% of its decisions: people may be approving without reading. Re-tier the tool (a lower risk, or no human gating, in the policy file)",
				humanDuration(intent.FastApproval), 100*trust.FatigueFastShare)
			if t.Ungrantable == "" {
				r.Suggestion += ", or grant its calls: “Approve and allow similar…” on its next card or packet."
			} else {
				r.Suggestion += "; its calls cannot be granted (" + t.Ungrantable + ")."
			}
			r.Links = append(r.Links, contract)
			if t.Ungrantable == "" {
				r.Links = append(r.Links, views.FatigueLink{Href: "/grants", Text: "Grants."})
			}
			if carded[t.ActionClass] {
				r.Links = append(r.Links, views.FatigueLink{Href: "#class-" + domID(t.ActionClass), Text: "The class's graduation."})
			}
			if v.Thresholds != nil {
				r.Links = append(r.Links, views.FatigueLink{Href: "#thresholds", Text: "Graduation thresholds."})
			}
		case trust.SuggestTighten:
			r.Suggestion = fmt.Sprintf("Rejected in %.0f %% or more of its decisions: agents often propose calls of it that people refuse. Tighten: human gating or a constraint for the tool in the policy file, a stricter mode where it is called, and no grants for it.",
				100*trust.FatigueRejectedShare)
			r.Links = append(r.Links, contract, views.FatigueLink{Href: "/grants", Text: "Grants to revoke."})
		default:
			r.Kind = ""
		}
		out.Rows = append(out.Rows, r)
	}
	return out
}
