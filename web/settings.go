package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/settings"
	"github.com/gatehouse/gatehouse/views"
)

// settingsPage handles "GET /admin/settings" (admins).
func (s *Server) settingsPage(c echo.Context) error {
	st, err := s.settings.Get(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	v := views.SettingsView{WorkspaceID: principal(c).WorkspaceID.String(), AutoApproveHighRisk: st.AutoApproveHighRisk, ConfirmRunsHighRisk: st.ConfirmRunsHighRisk, InternalDomains: strings.Join(st.InternalDomains, "\n"),
		WebhookAllowlist: strings.Join(st.WebhookAllowlist, "\n"), RationaleMinLength: strconv.Itoa(st.RationaleMinLength), Saved: c.QueryParam("saved") == "1",
		RationaleMode: st.RationaleMode, Pinned: s.settings.Pinned(), PolicyFile: s.policyFilePath()}
	if r := st.Approvals; r != nil {
		v.EscalateAfterMinutes, v.EscalateToRole, v.ApprovalQuorums = strconv.Itoa(r.EscalateAfterMinutes), r.EscalateToRole, settings.QuorumsText(r.Quorums)
	}
	if st.RationaleWarnUntil != nil {
		v.RationaleWarnUntil = st.RationaleWarnUntil.UTC().Format(time.DateOnly)
		v.RationaleWarnExpired = !st.RationaleWarnUntil.After(time.Now())
	}
	return render(c, http.StatusOK, views.SettingsPage(s.shell(c, "Settings", "admin"), v))
}

// saveSettings handles "POST /admin/settings"; bad input re-renders the
// form as typed, with the field named.
func (s *Server) saveSettings(c echo.Context) error {
	if _, err := s.settings.Get(c.Request().Context(), principal(c)); err != nil {
		return err // only admins get as far as the form's errors
	}
	internal, webhook := c.FormValue("internal_domains"), c.FormValue("webhook_allowlist")
	next := settings.Settings{AutoApproveHighRisk: c.FormValue("auto_approve_high_risk") != "", ConfirmRunsHighRisk: c.FormValue("confirm_runs_high_risk") != ""}
	var errs []error
	var err error
	if next.InternalDomains, err = settings.Domains("internal_domains", internal); err != nil {
		errs = append(errs, err)
	}
	if next.WebhookAllowlist, err = settings.Domains("webhook_allowlist", webhook); err != nil {
		errs = append(errs, err)
	}
	minLen := strings.TrimSpace(c.FormValue("rationale_min_length"))
	if n, err := strconv.Atoi(minLen); err != nil || n < 10 || n > 500 {
		errs = append(errs, apperr.Invalid("", apperr.FieldError{Field: "rationale_min_length", Message: "must be a whole number from 10 to 500"}))
	} else {
		next.RationaleMinLength = n
	}
	mode, until := c.FormValue("rationale_mode"), strings.TrimSpace(c.FormValue("rationale_warn_until"))
	next.RationaleMode = mode
	if mode == settings.RationaleWarn {
		// A date is midnight UTC at its start: warn mode ends as it begins.
		if t, err := time.Parse(time.DateOnly, until); err == nil {
			next.RationaleWarnUntil = &t
		} else if until != "" {
			errs = append(errs, apperr.Invalid("", apperr.FieldError{Field: "rationale_warn_until", Message: "must be a date (2006-01-02)"}))
		}
	}
	if next.RationaleMode == "" {
		next.RationaleMode = settings.RationaleStrict
	}
	after, to, quorums := strings.TrimSpace(c.FormValue("escalate_after_minutes")), strings.TrimSpace(c.FormValue("escalate_to_role")), c.FormValue("approval_quorums")
	if _, sent := c.Request().PostForm["escalate_after_minutes"]; sent {
		// A form without the approval rules (an older page) keeps them.
		rules := settings.ApprovalRules{EscalateToRole: strings.ToLower(to)}
		if after != "" {
			n, err := strconv.Atoi(after)
			if err != nil || n < 0 || n > settings.MaxEscalateAfterMinutes {
				errs = append(errs, apperr.Invalid("", apperr.FieldError{Field: "escalate_after_minutes",
					Message: fmt.Sprintf("must be a whole number from 0 (never) to %d", settings.MaxEscalateAfterMinutes)}))
			}
			rules.EscalateAfterMinutes = n
		}
		if rules.Quorums, err = settings.ParseQuorums("approval_quorums", quorums); err != nil {
			errs = append(errs, err)
		}
		next.Approvals = &rules
	}
	if len(errs) == 0 {
		_, err := s.settings.Update(c.Request().Context(), principal(c), next)
		if err == nil {
			return c.Redirect(http.StatusSeeOther, "/admin/settings?saved=1")
		}
		if apperr.Code(err) != apperr.EINVALID {
			return err
		}
		errs = append(errs, err)
	}
	v := views.SettingsView{WorkspaceID: principal(c).WorkspaceID.String(), AutoApproveHighRisk: next.AutoApproveHighRisk, ConfirmRunsHighRisk: next.ConfirmRunsHighRisk, InternalDomains: internal, WebhookAllowlist: webhook, RationaleMinLength: minLen,
		RationaleMode: next.RationaleMode, RationaleWarnUntil: until, Error: "Nothing was saved; fix the fields below.", Fields: map[string]string{},
		EscalateAfterMinutes: after, EscalateToRole: to, ApprovalQuorums: quorums, Pinned: s.settings.Pinned(), PolicyFile: s.policyFilePath()}
	for _, e := range errs {
		var ae *apperr.Error
		if errors.As(e, &ae) {
			for _, f := range ae.Fields {
				v.Fields[f.Field] = f.Message
			}
			if strings.HasPrefix(ae.Message, "Nothing was saved:") {
				v.Error = ae.Message // a pinned setting: say which, and where it is set
			}
		}
	}
	return render(c, http.StatusUnprocessableEntity, views.SettingsPage(s.shell(c, "Settings", "admin"), v))
}

// policyFilePath is the policy file this instance loads ("" : none).
func (s *Server) policyFilePath() string {
	if s.policy == nil {
		return ""
	}
	return s.policy.Status().Path
}
