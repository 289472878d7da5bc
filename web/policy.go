package web

import (
	"context"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/replay"
	"github.com/gatehouse/gatehouse/views"
)

// policyStatus is the policy file in force on this instance and every
// instance's, for /admin (nil when the server has no loader).
func (s *Server) policyStatus(ctx context.Context) (*views.PolicyStatusView, error) {
	if s.policy == nil {
		return nil, nil
	}
	st := s.policy.Status()
	v := &views.PolicyStatusView{Path: st.Path, FileHash: st.FileHash, PolicyHash: st.PolicyHash, LoadedAt: st.LoadedAt, Trigger: st.Trigger}
	if e := st.Error; e != nil {
		v.Error = &views.PolicyErrorView{Message: e.Message, Line: e.Line, At: e.At, Trigger: e.Trigger}
	}
	instances, err := s.policy.Instances(ctx)
	if err != nil {
		return nil, err
	}
	files := map[string]bool{}
	for _, in := range instances {
		iv := views.PolicyInstanceView{ID: in.InstanceID, Hostname: in.Hostname, Path: in.Path, FileHash: in.FileHash, PolicyHash: in.PolicyHash,
			SeenAt: in.SeenAt, Gone: in.Gone, This: in.InstanceID == st.InstanceID}
		if in.LoadedAt != nil {
			iv.LoadedAt = *in.LoadedAt
		}
		if in.Error != nil {
			iv.Error, iv.ErrorLine = in.Error.Message, in.Error.Line
		}
		if !in.Gone {
			v.Live++
			files[in.FileHash] = true
		}
		v.Instances = append(v.Instances, iv)
	}
	v.Agree = len(files) <= 1
	return v, nil
}

// policyPage handles "GET /admin/policy": the policy file in force on every
// instance, and what its shadow rules would have changed on the
// workspace's calls.
func (s *Server) policyPage(c echo.Context) error {
	ctx := c.Request().Context()
	status, err := s.policyStatus(ctx)
	if err != nil {
		return err
	}
	rules, err := s.policy.ShadowRules(ctx, principal(c).WorkspaceID)
	if err != nil {
		return err
	}
	v := views.PolicyPageView{Status: status}
	for _, r := range rules {
		v.Shadow = append(v.Shadow, views.ShadowRuleView{Tool: r.Tool, Rule: r.Rule, Since: r.Since, Changes: r.Changes,
			NewlyAsks: r.Counts[replay.NewlyAsks], NewlyAllowed: r.Counts[replay.NewlyAllowed], NewlyBlocked: r.Counts[replay.NewlyBlocked], Restated: r.Counts[replay.Restated],
			ToolURL: "/tools#tool-" + url.PathEscape(r.Tool)})
	}
	return render(c, http.StatusOK, views.PolicyPage(s.shell(c, "Policy", "admin"), v))
}
