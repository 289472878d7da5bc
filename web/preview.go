package web

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/views"
)

// The shadow preview of a setting, before a person raises it: the page's
// fragment, and the same as JSON.

type previewJSON struct {
	Setting          string             `json:"setting"`
	Value            string             `json:"value"`
	Calls            int                `json:"calls"`
	WouldRun         int                `json:"would_run"`
	RanWithoutAsking int                `json:"ran_without_asking"`
	Classes          []previewClassJSON `json:"classes"`
}

type previewClassJSON struct {
	ActionClass string            `json:"action_class"`
	Calls       int               `json:"calls"`
	WouldRun    int               `json:"would_run"`
	Newly       int               `json:"newly"`
	Overruled   []previewCallJSON `json:"overruled"`
}

type previewCallJSON struct {
	ProposalID string `json:"proposal_id"`
	Tool       string `json:"tool"`
	Status     string `json:"status"`
	Edited     bool   `json:"edited"`
}

func toPreviewJSON(p proposals.Preview) previewJSON {
	out := previewJSON{Setting: p.Setting, Value: p.Value, Calls: p.Calls, WouldRun: p.WouldRun, RanWithoutAsking: p.RanWithoutAsking, Classes: []previewClassJSON{}}
	for _, c := range p.Classes {
		cj := previewClassJSON{ActionClass: c.ActionClass, Calls: c.Calls, WouldRun: c.WouldRun, Newly: c.Newly, Overruled: []previewCallJSON{}}
		for _, o := range c.Overruled {
			cj.Overruled = append(cj.Overruled, previewCallJSON{ProposalID: o.ID.String(), Tool: o.Tool, Status: o.Status, Edited: o.Edited})
		}
		out.Classes = append(out.Classes, cj)
	}
	return out
}

func toPreviewView(p proposals.Preview, label string, scope proposals.Scope) views.PreviewView {
	v := views.PreviewView{Label: label, Calls: p.Calls, WouldRun: p.WouldRun, RanBefore: p.RanWithoutAsking}
	for _, c := range p.Classes {
		cv := views.PreviewClassView{ActionClass: c.ActionClass, Calls: c.Calls, WouldRun: c.WouldRun, Newly: c.Newly}
		for _, o := range c.Overruled {
			what := "rejected"
			if o.Edited {
				what = "edited"
			}
			url := "" // a workspace preview spans scopes: the call is named, not linked
			if scope.ID != uuid.Nil {
				url = proposalURL(proposals.Proposal{ID: o.ID, Scope: scope})
			}
			cv.Overruled = append(cv.Overruled, views.PreviewCallView{ID: o.ID.String(), Tool: o.Tool, What: what, URL: url})
		}
		v.Classes = append(v.Classes, cv)
	}
	return v
}

// conversationPreview handles "GET /conversations/:id/preview" (the
// header's "What would change?").
func (s *Server) conversationPreview(c echo.Context) error {
	return s.scopePreview(c, conversations.ErrNotFound, proposals.InConversation, "permission_mode", false)
}

// notebookPreview handles "GET /notebooks/:id/preview".
func (s *Server) notebookPreview(c echo.Context) error {
	return s.scopePreview(c, notebooks.ErrNotFound, proposals.InNotebook, "trust_level", false)
}

// apiConversationPreview handles "GET /api/v1/conversations/:id/preview".
func (s *Server) apiConversationPreview(c echo.Context) error {
	return s.scopePreview(c, conversations.ErrNotFound, proposals.InConversation, "permission_mode", true)
}

// apiNotebookPreview handles "GET /api/v1/notebooks/:id/preview".
func (s *Server) apiNotebookPreview(c echo.Context) error {
	return s.scopePreview(c, notebooks.ErrNotFound, proposals.InNotebook, "trust_level", true)
}

func (s *Server) scopePreview(c echo.Context, notFound error, scopeOf func(id uuid.UUID) proposals.Scope, param string, asJSON bool) error {
	id, err := pathID(c, notFound)
	if err != nil {
		return err
	}
	scope := scopeOf(id)
	value := c.QueryParam(param)
	p, err := s.props.PreviewScope(c.Request().Context(), principal(c), scope, value)
	if err != nil {
		return err
	}
	if asJSON {
		return c.JSON(http.StatusOK, toPreviewJSON(p))
	}
	return render(c, http.StatusOK, views.ShadowPreview(toPreviewView(p, strconv.Quote(value), scope)))
}

// settingsPreview handles "GET /admin/settings/preview" (admins): what
// auto-approving high-risk calls would have changed.
func (s *Server) settingsPreview(c echo.Context) error {
	on, err := strconv.ParseBool(c.QueryParam("auto_approve_high_risk"))
	if err != nil {
		return apperr.Invalid("auto_approve_high_risk must be true or false.", apperr.FieldError{Field: "auto_approve_high_risk", Message: "must be true or false"})
	}
	p, err := s.props.PreviewWorkspace(c.Request().Context(), principal(c), "auto_approve_high_risk", on)
	if err != nil {
		return err
	}
	if jsonCaller(c) {
		return c.JSON(http.StatusOK, toPreviewJSON(p))
	}
	return render(c, http.StatusOK, views.ShadowPreview(toPreviewView(p, "high-risk calls auto-approved", proposals.Scope{})))
}

// graduationHints are the hints for the classes the scope's calls use:
// each that is ready, with the one-click raise to value.
func (s *Server) graduationHints(c echo.Context, scope proposals.Scope, url, field, value, label string) ([]views.GraduationHint, error) {
	if s.trust == nil {
		return nil, nil
	}
	ctx := c.Request().Context()
	classes, err := s.props.ScopeClasses(ctx, principal(c), scope)
	if err != nil {
		return nil, err
	}
	hints, err := s.trust.Hints(ctx, principal(c), classes)
	if err != nil {
		return nil, err
	}
	out := make([]views.GraduationHint, len(hints))
	for i, h := range hints {
		out[i] = views.GraduationHint{ActionClass: h.ActionClass, Approvals: h.Approvals, Edits: h.Edits, Rejections: h.Rejections,
			Samples: h.Samples, CILow: strconv.FormatFloat(h.CILow, 'f', 2, 64), RaiseURL: url, RaiseField: field, RaiseTo: value, RaiseLabel: label}
	}
	return out, nil
}

// nextTrustLevel is the level above t, "" at the top.
func nextTrustLevel(t policy.TrustLevel) policy.TrustLevel {
	switch t {
	case policy.TrustCautious:
		return policy.TrustTrusted
	case policy.TrustTrusted:
		return policy.TrustAutonomous
	}
	return ""
}
