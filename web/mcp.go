package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/mcp"
	"github.com/gatehouse/gatehouse/internal/notebooks"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// Headers and query parameters that bind an MCP session to a scope.
const (
	headerConversation = "Gatehouse-Conversation"
	headerNotebook     = "Gatehouse-Notebook"
)

// newGateway builds the /mcp endpoint on the server's services.
func (s *Server) newGateway(upstreams *mcp.Upstreams) *mcp.Gateway {
	return mcp.NewGateway(s.props, s.registry, s.convs, upstreams, s.log, mcp.Options{
		ProposalURL:    proposalURL,
		Feedback:       s.feedback,
		AllowedOrigins: s.cfg.MCPAllowedOrigins,
		Queries:        s.q,
		Telemetry:      s.cfg.Telemetry,
		ApprovalURL:    func(id uuid.UUID) string { return "/admin/approvals/" + id.String() },
		StoreCall: func(p proposals.Proposal, refused error) (proposals.StoredResponse, error) {
			if refused != nil {
				// Refused after it was recorded (a human-only call): the
				// problem the REST API stores for it.
				prob := toProblem(refused)
				prob.Title, prob.Type = http.StatusText(prob.Status), "urn:gatehouse:problem:"+prob.Code
				body, err := json.Marshal(prob.body())
				return proposals.StoredResponse{Status: prob.Status, ContentType: "application/problem+json", Body: body}, err
			}
			body, err := json.Marshal(toProposalJSON(p))
			return proposals.StoredResponse{Status: proposalStatus(p), ContentType: echo.MIMEApplicationJSON, Body: body}, err
		},
	})
}

// mcpOrigin refuses a request to /mcp from a browser page of a foreign
// origin (DNS rebinding, a cross-site request) before anything else runs,
// token or not: 403 with a JSON-RPC error. A request without Origin (a
// client that is not a browser) goes on. See mcp.Gateway.AllowsOrigin.
func (s *Server) mcpOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if s.gateway.RefuseForeignOrigin(c.Response(), r, c.Scheme()+"://"+r.Host) {
			return nil
		}
		return next(c)
	}
}

// mcpEndpoint handles "GET, POST, DELETE /mcp": the MCP endpoint
// (Streamable HTTP), behind mcpOrigin and requireToken. A request that
// opens a session may name the conversation or notebook its calls are
// proposed in (Gatehouse-Conversation or Gatehouse-Notebook, or
// ?conversation= or ?notebook=); it must be the token owner's. Without
// one, the session gets a new conversation named after the client.
func (s *Server) mcpEndpoint(c echo.Context) error {
	r := c.Request()
	conn := mcp.Connection{Principal: principal(c), Origin: c.Scheme() + "://" + r.Host}
	if r.Header.Get("Mcp-Session-Id") == "" {
		scope, err := s.mcpScope(c)
		if err != nil {
			return err
		}
		conn.Scope = scope
	}
	s.gateway.ServeHTTP(c.Response(), r.WithContext(mcp.WithConnection(r.Context(), conn)))
	return nil
}

// mcpScope is the scope a new MCP session asks for, checked to be the
// caller's (another user's is not found); when it names none, the scope
// its token was bound to at consent (an OAuth grant's), if any; nil
// otherwise.
func (s *Server) mcpScope(c echo.Context) (*proposals.Scope, error) {
	r := c.Request()
	conv := firstOf(r.Header.Get(headerConversation), c.QueryParam("conversation"))
	nb := firstOf(r.Header.Get(headerNotebook), c.QueryParam("notebook"))
	ctx, p := r.Context(), principal(c)
	if conv == "" && nb == "" {
		switch {
		case p.Bound.Conversation != uuid.Nil:
			conv = p.Bound.Conversation.String()
		case p.Bound.Notebook != uuid.Nil:
			nb = p.Bound.Notebook.String()
		}
	}
	switch {
	case conv != "" && nb != "":
		return nil, apperr.Errorf(apperr.EBADREQ, "Bind the session to a conversation or a notebook, not both.")
	case conv != "":
		id, err := uuid.Parse(conv)
		if err != nil {
			return nil, conversations.ErrNotFound
		}
		if _, err := s.convs.Get(ctx, p, id); err != nil {
			return nil, err
		}
		scope := proposals.InConversation(id)
		return &scope, nil
	case nb != "":
		id, err := uuid.Parse(nb)
		if err != nil {
			return nil, notebooks.ErrNotFound
		}
		if _, err := s.nbs.Get(ctx, p, id); err != nil {
			return nil, err
		}
		scope := proposals.InNotebook(id)
		return &scope, nil
	}
	return nil, nil
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// isMCP reports whether the request is for the MCP endpoint (answered in
// problem+json with a bearer challenge, like the API).
func isMCP(c echo.Context) bool { return c.Request().URL.Path == "/mcp" }
