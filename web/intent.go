package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/intent"
	"github.com/gatehouse/gatehouse/views"
)

// intentQuery reads ?q=&since=&until= (dates or RFC 3339 times; until a
// date means up to the end of that day).
func intentQuery(c echo.Context) (intent.Query, error) {
	in := intent.Query{Q: c.QueryParam("q")}
	var fields []apperr.FieldError
	if v := strings.TrimSpace(c.QueryParam("since")); v != "" {
		t, err := parseSince(v)
		if err != nil {
			fields = append(fields, apperr.FieldError{Field: "since", Message: "must be a date (2006-01-02) or an RFC 3339 time"})
		}
		in.Since = t
	}
	if v := strings.TrimSpace(c.QueryParam("until")); v != "" {
		if t, err := time.Parse(time.DateOnly, v); err == nil {
			in.Until = t.AddDate(0, 0, 1)
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			in.Until = t
		} else {
			fields = append(fields, apperr.FieldError{Field: "until", Message: "must be a date (2006-01-02) or an RFC 3339 time"})
		}
	}
	if len(fields) > 0 {
		return in, apperr.Invalid("Invalid search.", fields...)
	}
	return in, nil
}

func percent(f float64) string { return fmt.Sprintf("%.0f %%", f*100) }

// intentPage handles "GET /admin/intent" (admins): calls' rationales,
// searched and counted; JSON for Accept: application/json or a bearer token.
func (s *Server) intentPage(c echo.Context) error {
	in, err := intentQuery(c)
	if err == nil {
		var res intent.Result
		res, err = s.intent.Search(c.Request().Context(), principal(c), in, time.Now())
		if err == nil {
			return s.renderIntent(c, res)
		}
	}
	if jsonCaller(c) || apperr.Code(err) != apperr.EINVALID {
		return err
	}
	v := views.IntentView{Q: c.QueryParam("q"), Since: c.QueryParam("since"), Until: c.QueryParam("until"), Error: apperr.Message(err) + " " + fieldSummary(err)}
	return render(c, http.StatusUnprocessableEntity, views.IntentPage(s.shell(c, "Intent", "admin"), v))
}

func (s *Server) renderIntent(c echo.Context, res intent.Result) error {
	if jsonCaller(c) {
		calls, groups := []map[string]any{}, []map[string]any{}
		for _, x := range res.Calls {
			calls = append(calls, map[string]any{"id": x.ID, "tool": x.Tool, "action_class": x.ActionClass, "rationale": x.Rationale,
				"status": x.Status, "edited": x.Edited, "created_at": rfc3339(x.CreatedAt)})
		}
		for _, g := range res.Groups {
			groups = append(groups, map[string]any{"action_class": g.ActionClass, "tool": g.Tool, "calls": g.Calls, "refused": g.Refused,
				"edited": g.Edited, "refused_share": g.RefusedShare(), "edited_share": g.EditedShare()})
		}
		return c.JSON(http.StatusOK, map[string]any{"q": res.Query.Q, "since": rfc3339(res.Query.Since), "until": rfc3339(res.Query.Until),
			"total": res.Total, "rationale_warnings": res.Warned, "groups": groups, "calls": calls})
	}
	v := views.IntentView{Q: res.Query.Q, Since: c.QueryParam("since"), Until: c.QueryParam("until"), Total: res.Total, Warned: res.Warned,
		Capped: res.Capped, Scanned: intent.WordScan, Updating: res.Updating,
		Period: "from " + res.Query.Since.UTC().Format("2006-01-02 15:04") + " to " + res.Query.Until.UTC().Format("2006-01-02 15:04 UTC")}
	for _, g := range res.Groups {
		v.Groups = append(v.Groups, views.IntentGroup{ActionClass: g.ActionClass, Tool: g.Tool, Calls: g.Calls, Refused: g.Refused, Edited: g.Edited,
			RefusedShare: percent(g.RefusedShare()), EditedShare: percent(g.EditedShare())})
	}
	for _, x := range res.Calls {
		v.Calls = append(v.Calls, views.IntentCall{When: x.CreatedAt, Tool: x.Tool, ActionClass: x.ActionClass,
			Rationale: x.Rationale, Status: x.Status, Edited: x.Edited})
	}
	return render(c, http.StatusOK, views.IntentPage(s.shell(c, "Intent", "admin"), v))
}
