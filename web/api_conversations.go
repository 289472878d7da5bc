package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/tools"
)

type conversationJSON struct {
	ID             string `json:"id"`
	Title          string `json:"title"`
	PermissionMode string `json:"permission_mode"`
	// Environment is where its calls take effect (omitted until set).
	Environment string `json:"environment,omitempty"`
	URL         string `json:"url"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func toConversationJSON(c conversations.Conversation) conversationJSON {
	return conversationJSON{ID: c.ID.String(), Title: c.Title, PermissionMode: string(c.PermissionMode), Environment: c.Environment,
		URL: "/conversations/" + c.ID.String(), CreatedAt: rfc3339(c.CreatedAt), UpdatedAt: rfc3339(c.UpdatedAt)}
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// pathID parses the :id path parameter; a malformed id is simply not found.
func pathID(c echo.Context, notFound error) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return uuid.Nil, notFound
	}
	return id, nil
}

// bindJSON decodes a JSON body strictly (checked by checkInput, and against
// openapi.yaml on /api/v1): unknown fields are refused, naming them.
func bindJSON(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// apiCreateConversation handles "POST /api/v1/conversations".
func (s *Server) apiCreateConversation(c echo.Context) error {
	var in struct {
		Title string `json:"title"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conv, err := s.convs.Create(c.Request().Context(), principal(c), in.Title)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toConversationJSON(conv))
}

// apiListConversations handles "GET /api/v1/conversations[?limit=&before=]":
// a page of the caller's conversations, most recently active first, and
// the cursor of the next page ("next", empty on the last).
func (s *Server) apiListConversations(c echo.Context) error {
	limit := conversations.DefaultListLimit
	if raw := c.QueryParam("limit"); raw != "" {
		var err error
		if limit, err = strconv.Atoi(raw); err != nil {
			limit = -1 // refused by the service, naming limit
		}
	}
	page, err := s.convs.List(c.Request().Context(), principal(c), conversations.ListPage{Limit: limit, Before: c.QueryParam("before")})
	if err != nil {
		return err
	}
	out := make([]conversationJSON, len(page.Conversations))
	for i, conv := range page.Conversations {
		out[i] = toConversationJSON(conv)
	}
	return c.JSON(http.StatusOK, map[string]any{"conversations": out, "next": page.Next})
}

// apiGetConversation handles "GET /api/v1/conversations/:id".
func (s *Server) apiGetConversation(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	conv, err := s.convs.Get(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toConversationJSON(conv))
}

// apiUpdateConversation handles "PATCH /api/v1/conversations/:id".
func (s *Server) apiUpdateConversation(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Title          *string `json:"title"`
		PermissionMode *string `json:"permission_mode"`
		Environment    *string `json:"environment"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conv, err := s.convs.Update(c.Request().Context(), principal(c), id, conversations.Update{Title: in.Title, PermissionMode: in.PermissionMode, Environment: in.Environment})
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Conversation(id))
	return c.JSON(http.StatusOK, toConversationJSON(conv))
}

type messageJSON struct {
	ID         int64   `json:"id"`
	Role       string  `json:"role"`
	Content    string  `json:"content"`
	ProposalID *string `json:"proposal_id,omitempty"`
	CreatedAt  string  `json:"created_at"`
}

func toMessageJSON(m conversations.Message) messageJSON {
	out := messageJSON{ID: m.ID, Role: m.Role, Content: m.Content, CreatedAt: rfc3339(m.CreatedAt)}
	if m.ProposalID != uuid.Nil {
		id := m.ProposalID.String()
		out.ProposalID = &id
	}
	return out
}

// apiPostMessage handles "POST /api/v1/conversations/:id/messages".
func (s *Server) apiPostMessage(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if handled, err := s.apiStartTurn(c, id, in.Role, in.Content); handled {
		return err // the owner's message starts a model turn (web/chat.go)
	}
	m, err := s.convs.PostMessage(c.Request().Context(), principal(c), id, in.Role, in.Content)
	if err != nil {
		return err
	}
	s.announce(principal(c).WorkspaceID, events.Conversation(id))
	return c.JSON(http.StatusCreated, toMessageJSON(m))
}

// apiListMessages handles
// "GET /api/v1/conversations/:id/messages?limit=N&before=|after=<cursor>":
// a page of the transcript, oldest first (the latest page without a
// cursor), with the cursors of the pages before (prev, when there are
// earlier messages) and after it (next, always: newer messages now, or
// later).
func (s *Server) apiListMessages(c echo.Context) error {
	id, err := pathID(c, conversations.ErrNotFound)
	if err != nil {
		return err
	}
	limit := conversations.DefaultLimit
	if raw := c.QueryParam("limit"); raw != "" {
		if limit, err = strconv.Atoi(raw); err != nil {
			limit = -1 // refused by the service, naming limit
		}
	}
	page, err := s.convs.Messages(c.Request().Context(), principal(c), id,
		conversations.Range{Limit: limit, Before: c.QueryParam("before"), After: c.QueryParam("after")})
	if err != nil {
		return err
	}
	out := messagesJSON{Messages: make([]messageJSON, len(page.Messages)), Prev: page.Prev, Next: page.Next}
	for i, m := range page.Messages {
		out.Messages[i] = toMessageJSON(m)
	}
	return c.JSON(http.StatusOK, out)
}

type messagesJSON struct {
	Messages []messageJSON `json:"messages"`
	Prev     string        `json:"prev,omitempty"`
	Next     string        `json:"next"`
}

type toolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Effect      string          `json:"effect"`
	InputSchema json.RawMessage `json:"input_schema"`
	Contract    contractJSON    `json:"contract"`
	// CheatsheetURL is where its cheatsheet is, when it has one.
	CheatsheetURL string `json:"cheatsheet_url,omitempty"`
}

type contractJSON struct {
	Authority     string   `json:"authority"`
	Risk          string   `json:"risk"`
	ActionClass   string   `json:"action_class,omitempty"`
	ActionClasses []string `json:"action_classes,omitempty"`
	HumanGating   struct {
		Required       bool   `json:"required"`
		Threshold      string `json:"threshold,omitempty"`
		ApproverRole   string `json:"approver_role"`
		WindowSeconds  int    `json:"approval_window_seconds"`
		NotGatedReason string `json:"not_gated_reason,omitempty"`
	} `json:"human_gating"`
	Idempotency struct {
		Required      bool     `json:"required"`
		KeyFields     []string `json:"key_fields,omitempty"`
		WindowSeconds int      `json:"window_seconds"`
	} `json:"idempotency"`
	RateLimits struct {
		PerAgentPerMinute   int `json:"per_agent_per_minute"`
		PerWorkspacePerHour int `json:"per_workspace_per_hour"`
		PerWorkspacePerDay  int `json:"per_workspace_per_day"`
	} `json:"rate_limits"`
	RetentionDays int                 `json:"audit_retention_days"`
	Constraints   []policy.Constraint `json:"constraints"`
	// ClassRationale says why the tool has its authority class;
	// Reversibility how its effect is undone; PIIFields which fields hold
	// personal data (redacted in the audit export); SLA its stated service
	// level (empty when it states none).
	ClassRationale string   `json:"class_rationale"`
	Reversibility  string   `json:"reversibility"`
	PIIFields      []string `json:"pii_fields"`
	SLA            struct {
		P95LatencyMS int    `json:"p95_latency_ms,omitempty"`
		Availability string `json:"availability,omitempty"`
	} `json:"sla"`
}

func toToolJSON(t *tools.Tool) toolJSON {
	c := t.Contract
	out := toolJSON{Name: t.Name, Description: t.Description, Effect: string(t.Effect), InputSchema: t.Schema}
	if t.Cheatsheet != "" {
		// ADR-036: a description opens with "fetch the cheatsheet first".
		out.CheatsheetURL = "/api/v1/tools/" + t.Name + "/cheatsheet"
		out.Description = tools.CheatsheetFirst(out.CheatsheetURL) + " " + t.Description
	}
	k := &out.Contract
	k.Authority, k.Risk, k.ActionClass, k.ActionClasses = string(c.Authority), string(c.Risk), c.ActionClass, c.ActionClasses
	k.HumanGating.Required, k.HumanGating.Threshold, k.HumanGating.ApproverRole = c.Gating.Required, c.Gating.Threshold, c.Gating.ApproverRole
	k.HumanGating.WindowSeconds, k.HumanGating.NotGatedReason = int(c.Gating.Window.Seconds()), c.Gating.NotGatedReason
	k.Idempotency.Required, k.Idempotency.KeyFields, k.Idempotency.WindowSeconds = c.Idempotency.Required, c.Idempotency.KeyFields, int(c.Idempotency.Window.Seconds())
	k.RateLimits.PerAgentPerMinute, k.RateLimits.PerWorkspacePerHour, k.RateLimits.PerWorkspacePerDay = c.RateLimits.PerAgentPerMinute, c.RateLimits.PerWorkspacePerHour, c.RateLimits.PerWorkspacePerDay
	k.RetentionDays = int(c.Retention.Hours() / 24)
	k.Constraints = c.Constraints
	if k.Constraints == nil {
		k.Constraints = []policy.Constraint{}
	}
	k.ClassRationale, k.Reversibility, k.PIIFields = c.ClassRationale, c.Reversibility, c.PIIFields
	if k.PIIFields == nil {
		k.PIIFields = []string{}
	}
	k.SLA.P95LatencyMS, k.SLA.Availability = int(c.SLA.P95Latency.Milliseconds()), c.SLA.Availability
	return out
}

// apiListTools handles "GET /api/v1/tools".
func (s *Server) apiListTools(c echo.Context) error {
	list := s.props.Tools()
	out := make([]toolJSON, len(list))
	for i, t := range list {
		out[i] = toToolJSON(t)
	}
	return c.JSON(http.StatusOK, map[string]any{"tools": out})
}
