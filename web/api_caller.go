package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Caller-executed calls over REST (docs/caller-tools.md): the caller
// proposes as for any tool, waits with GET /api/v1/proposals/{id}?wait=,
// runs the tool with the execution ticket the answer carries, and reports
// the outcome here.

// apiReportOutcome handles "POST /api/v1/proposals/:id/outcome".
func (s *Server) apiReportOutcome(c echo.Context) error {
	id, err := pathID(c, proposals.ErrNotFound)
	if err != nil {
		return err
	}
	var in struct {
		Ticket       string          `json:"ticket"`
		Status       string          `json:"status"`
		Result       json.RawMessage `json:"result"`
		ResultDigest string          `json:"result_digest"`
		Error        string          `json:"error"`
		Arguments    json.RawMessage `json:"arguments"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.props.ReportOutcome(c.Request().Context(), principal(c), id, proposals.Report{Ticket: in.Ticket, Status: in.Status,
		Result: in.Result, ResultDigest: in.ResultDigest, Error: in.Error, Arguments: in.Arguments})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProposalJSON(p))
}

// apiWaitProposal is "GET /api/v1/proposals/:id?wait=30s&status=pending":
// the proposal once its status differs from status (by default: once it
// no longer waits for a person), or when the wait ends.
func (s *Server) apiWaitProposal(c echo.Context, id uuid.UUID) error {
	wait, err := parseWait(c.QueryParam("wait"))
	if err != nil {
		return err
	}
	seen := c.QueryParam("status")
	p, err := s.props.Wait(c.Request().Context(), principal(c), id, seen, wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProposalJSON(p))
}

// parseWait reads a wait: a duration (30s, 1m) or whole seconds, from
// proposals.MinWait to proposals.MaxWait.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		d, err = time.Duration(n)*time.Second, nerr
	}
	if err != nil || d < proposals.MinWait || d > proposals.MaxWait {
		return 0, apperr.Invalid("wait must be a duration from 1s to 60s, such as 30s.", apperr.FieldError{Field: "wait", Message: "must be a duration from 1s to 60s"})
	}
	return d, nil
}

// declaredWords says on a card what the caller declared of its tool with
// the call ("" for a tool the registry declares).
func declaredWords(d *tools.CallerDeclaration) string {
	if d == nil {
		return ""
	}
	words := fmt.Sprintf("%s (effect %s, authority %s", d.Description, d.Effect, d.Authority)
	if d.ActionClass != "" {
		words += ", class " + d.ActionClass
	}
	return words + ")"
}
