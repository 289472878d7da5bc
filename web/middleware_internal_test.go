package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/auth"
)

// The queue admits holders of a named approver role; settings, the outbox
// and settling stay with approvers and admins.
func TestRequireResolver_AdmitsHoldersOfANamedRoleWhereRequireApproverDoesNot(t *testing.T) {
	t.Parallel()
	s := &Server{}
	reached := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	finance := []string{"finance-approver"}
	cases := []struct {
		name               string
		p                  auth.Principal
		resolver, approver bool
	}{
		{"nobody", auth.Principal{}, false, false},
		{"member", auth.Principal{Role: auth.RoleMember}, false, false},
		{"member holding finance-approver", auth.Principal{Role: auth.RoleMember, ApproverRoles: finance}, true, false},
		{"approver", auth.Principal{Role: auth.RoleApprover}, true, true},
		{"admin", auth.Principal{Role: auth.RoleAdmin}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mw := range []struct {
				name  string
				fn    echo.MiddlewareFunc
				admit bool
			}{{"requireResolver", s.requireResolver, c.resolver}, {"requireApprover", s.requireApprover, c.approver}} {
				ctx := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/admin/approvals", nil), httptest.NewRecorder())
				ctx.Set(principalKey, c.p)
				err := mw.fn(reached)(ctx)
				if admitted := err == nil; admitted != mw.admit {
					t.Fatalf("%s admitted = %v (err %v), want %v", mw.name, admitted, err, mw.admit)
				}
				if err != nil && apperr.Code(err) != apperr.EFORBIDDEN {
					t.Fatalf("%s err = %v, want forbidden", mw.name, err)
				}
			}
		})
	}
}
