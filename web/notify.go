package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/notify"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/views"
)

// Approvals that reach people: each person's notification settings, and
// the page a notification's one-time link opens (internal/notify).

// notifyRoutes registers the settings page and the links' page.
func (s *Server) notifyRoutes(e *echo.Echo, signedIn []echo.MiddlewareFunc) {
	e.GET("/settings/notifications", s.notificationSettingsPage, signedIn...)
	e.POST("/settings/notifications", s.saveNotificationSettings, signedIn...)
	// A link's page: signing in comes back to it (requireUser's next).
	e.GET(notify.PathPrefix+":token", s.linkPage, signedIn...)
	e.POST(notify.PathPrefix+":token", s.decideByLink, signedIn...)
}

// sendNotifications delivers due notifications every so often, on every
// instance (each claims its own: internal/notify), until ctx ends.
func (s *Server) sendNotifications(ctx context.Context, every time.Duration) {
	defer close(s.notified)
	wait := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		n, err := s.notify.Send(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("sending notifications", "err", err)
			wait = min(2*wait, 10*time.Second)
		case n > 0:
			wait = 0 // more may be due
		default:
			wait = every
		}
	}
}

func (s *Server) notificationSettingsPage(c echo.Context) error {
	p := principal(c)
	prefs, err := s.notify.Get(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return s.renderNotificationSettings(c, http.StatusOK, views.NotificationSettingsView{Form: settingsForm(prefs), Secret: prefs.WebhookSecret})
}

func settingsForm(p notify.Preferences) views.NotificationSettingsForm {
	return views.NotificationSettingsForm{Email: p.Email, WebhookURL: p.WebhookURL, QuietStart: p.QuietStart, QuietEnd: p.QuietEnd,
		TimeZone: p.TimeZone, Digest: strconv.Itoa(p.DigestMinutes)}
}

func (s *Server) renderNotificationSettings(c echo.Context, status int, v views.NotificationSettingsView) error {
	sent, err := s.notify.Recent(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	for _, n := range sent {
		v.Recent = append(v.Recent, views.NotificationRow(n))
	}
	return render(c, status, views.NotificationSettingsPage(s.shell(c, "Notifications", "settings"), v))
}

// saveNotificationSettings handles "POST /settings/notifications" (form
// fields email, webhook_url, quiet_start, quiet_end, time_zone,
// digest_minutes): 303 back to the page, or the form as typed with each
// field's error (422).
func (s *Server) saveNotificationSettings(c echo.Context) error {
	form := views.NotificationSettingsForm{Email: c.FormValue("email") != "", WebhookURL: c.FormValue("webhook_url"),
		QuietStart: c.FormValue("quiet_start"), QuietEnd: c.FormValue("quiet_end"), TimeZone: c.FormValue("time_zone"), Digest: c.FormValue("digest_minutes")}
	in := notify.Preferences{Email: form.Email, WebhookURL: form.WebhookURL, QuietStart: form.QuietStart, QuietEnd: form.QuietEnd, TimeZone: form.TimeZone}
	fields := map[string]string{}
	if form.Digest != "" {
		n, err := strconv.Atoi(form.Digest)
		if err != nil {
			fields["digest_minutes"] = "must be a whole number of minutes"
		}
		in.DigestMinutes = n
	}
	if len(fields) == 0 {
		_, err := s.notify.Set(c.Request().Context(), principal(c), in)
		if err == nil {
			return c.Redirect(http.StatusSeeOther, "/settings/notifications")
		}
		var ae *apperr.Error
		if !errors.As(err, &ae) || len(ae.Fields) == 0 {
			return err
		}
		for _, f := range ae.Fields {
			fields[f.Field] = f.Message
		}
	}
	return s.renderNotificationSettings(c, http.StatusUnprocessableEntity, views.NotificationSettingsView{Form: form, Fields: fields})
}

// linkPage handles "GET /l/{token}": what the link would decide, for the
// person it was sent to, on a page made for a phone. It never acts; a
// link that cannot be used says why (and nothing is shown of the call
// to anyone but its recipient).
func (s *Server) linkPage(c echo.Context) error {
	token := c.Param("token")
	l, err := s.notify.Open(c.Request().Context(), principal(c), token)
	if err != nil {
		return s.renderLinkProblem(c, err)
	}
	return render(c, http.StatusOK, views.LinkPage(s.shell(c, "Decide a call", ""), s.linkView(l, token)))
}

func (s *Server) linkView(l notify.Link, token string) views.LinkView {
	v := views.LinkView{Token: token, Tool: l.Tool, Summary: l.Summary, Rationale: l.Rationale, Risk: l.Risk.String,
		ActionClass: l.ActionClass.String, Arguments: indented(l.Arguments), Packet: l.Packet,
		Expires: l.ExpiresAt.UTC().Format("15:04 UTC"), Irreversible: needsAck(l)}
	if v.Summary == "" {
		v.Summary = "Call " + l.Tool
	}
	var d policy.Decision
	if json.Unmarshal(l.Decision, &d) == nil {
		for _, layer := range d.Holding() {
			v.Why = append(v.Why, layer.Reason)
		}
	}
	return v
}

// needsAck: a destructive call (or an irreversible or payment one) asks for
// a second confirmation, as the approvals page does.
func needsAck(l notify.Link) bool {
	return l.Effect == string(policy.EffectDestructive) || l.ActionClass.String == "payment.initiate"
}

// decideByLink handles "POST /l/{token}" (form field action: approve or
// reject; reason for a rejection; irreversible_ack for a destructive
// call): the call is decided as the signed-in person, with every check
// the inbox and the card make, and the link is used up.
func (s *Server) decideByLink(c echo.Context) error {
	ctx, p, token := c.Request().Context(), principal(c), c.Param("token")
	l, err := s.notify.Open(ctx, p, token)
	if err != nil {
		return s.renderLinkProblem(c, err)
	}
	action := c.FormValue("action")
	v := s.linkView(l, token)
	switch {
	case action != "approve" && action != "reject":
		v.Error = "Choose Approve or Reject."
		return render(c, http.StatusUnprocessableEntity, views.LinkPage(s.shell(c, "Decide a call", ""), v))
	case action == "approve" && v.Irreversible && c.FormValue("irreversible_ack") == "":
		v.Error = "This call cannot be undone: tick the box to confirm you mean it."
		return render(c, http.StatusUnprocessableEntity, views.LinkPage(s.shell(c, "Decide a call", ""), v))
	}
	reason := c.FormValue("reason")
	if action == "reject" && reason == "" {
		reason = "Rejected from a notification's link."
	}
	switch {
	case l.Packet && action == "approve":
		_, _, err = s.props.Approve(ctx, p, l.ApprovalID.UUID, nil)
	case l.Packet:
		_, _, err = s.props.RejectApproval(ctx, p, l.ApprovalID.UUID, reason)
	case action == "approve":
		_, err = s.props.Apply(ctx, p, l.ProposalID, nil)
	default:
		_, err = s.props.Reject(ctx, p, l.ProposalID, reason)
	}
	if err != nil {
		var ae *apperr.Error
		if !errors.As(err, &ae) {
			return err
		}
		v.Error = ae.Message
		return render(c, toProblem(ae).Status, views.LinkPage(s.shell(c, "Decide a call", ""), v))
	}
	if err := s.notify.Used(ctx, p, token, l, action); err != nil && !errors.Is(err, notify.ErrLinkUsed) {
		return err
	}
	v.Done = map[string]string{"approve": "Approved. The call runs now; its outcome is in Gatehouse.", "reject": "Rejected. The call will not run."}[action]
	return render(c, http.StatusOK, views.LinkPage(s.shell(c, "Decide a call", ""), v))
}

// renderLinkProblem is the page of a link that does nothing, saying why.
func (s *Server) renderLinkProblem(c echo.Context, err error) error {
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		return err
	}
	return render(c, toProblem(ae).Status, views.LinkPage(s.shell(c, "Decide a call", ""), views.LinkView{Problem: ae.Message}))
}

// indented is a JSON document indented for reading.
func indented(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}
