package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/policy"
)

type meToken struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Connector is set only on a connector's token.
	Connector bool `json:"connector,omitempty"`
	// Scope is set only on a scoped token.
	Scope *policy.TokenScope `json:"scope,omitempty"`
}

type meResponse struct {
	UserID      string  `json:"user_id"`
	Email       string  `json:"email"`
	WorkspaceID string  `json:"workspace_id"`
	Role        string  `json:"role"`
	Token       meToken `json:"token"`
}

// apiMe handles "GET /api/v1/me": who the bearer token acts for.
func (s *Server) apiMe(c echo.Context) error {
	p := principal(c)
	return c.JSON(http.StatusOK, meResponse{
		UserID: p.UserID.String(), Email: p.Email, WorkspaceID: p.WorkspaceID.String(), Role: string(p.Role),
		Token: meToken{ID: p.TokenID.String(), Kind: string(p.TokenKind), Name: p.TokenName, Connector: p.Connector, Scope: p.TokenScope},
	})
}
