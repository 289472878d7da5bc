package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/feedback"
)

// SubmitFeedbackTool tells the workspace's admins where the agent got stuck.
const SubmitFeedbackTool = "submit_feedback"

func submitFeedbackTool() *sdk.Tool {
	closed := false
	text := func(desc string, max int) map[string]any {
		return map[string]any{"type": "string", "maxLength": max, "description": desc}
	}
	return &sdk.Tool{
		Name:  SubmitFeedbackTool,
		Title: "Submit feedback",
		Description: "Tell the workspace's admins where you got stuck: what you tried, what you expected and what happened instead. " +
			"Use it when a tool refused, failed or did not do what you needed; it changes nothing else. Name the tool and the proposal if there was one.",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false,
			"required": []any{"attempted_action", "expected_outcome", "actual_outcome", "severity", "rationale"},
			"properties": map[string]any{
				"attempted_action": text("What you tried to do (1 to 2000 characters)", feedback.MaxText),
				"expected_outcome": text("What you expected to happen (1 to 2000 characters)", feedback.MaxText),
				"actual_outcome":   text("What happened instead (1 to 2000 characters)", feedback.MaxText),
				"tool_called":      text("The tool you called, if any", feedback.MaxToolName),
				"error_seen":       text("The error you saw, if any (at most 4000 characters)", feedback.MaxErrorSeen),
				"severity":         map[string]any{"type": "string", "enum": []any{"low", "med", "high"}, "description": "How much it blocks you"},
				"rationale":        text("Why you report it (10 to 500 characters)", feedback.MaxRationale),
				"proposal_id":      map[string]any{"type": "string", "format": "uuid", "description": "The proposal id a call returned, if this is about one"},
			}},
		Annotations: &sdk.ToolAnnotations{Title: "Submit feedback", DestructiveHint: &closed, OpenWorldHint: &closed},
	}
}

// submitFeedback handles submit_feedback: the same Submit as POST /api/v1/feedback.
func (s *session) submitFeedback(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p, ok := principalOf(req.Extra)
	if !ok {
		return nil, fmt.Errorf("gatehouse: the request carries no principal")
	}
	var in struct {
		AttemptedAction string `json:"attempted_action"`
		ExpectedOutcome string `json:"expected_outcome"`
		ActualOutcome   string `json:"actual_outcome"`
		ToolCalled      string `json:"tool_called"`
		ErrorSeen       string `json:"error_seen"`
		Severity        string `json:"severity"`
		Rationale       string `json:"rationale"`
		ProposalID      string `json:"proposal_id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return toolError("The arguments must be an object of strings.", nil), nil
	}
	var proposal uuid.UUID
	if in.ProposalID != "" {
		id, err := uuid.Parse(in.ProposalID)
		if err != nil {
			return s.refused(apperr.Invalid("The proposal_id is not an id.", apperr.FieldError{Field: "proposal_id", Message: "must be a UUID"})), nil
		}
		proposal = id
	}
	it, err := s.g.opts.Feedback.Submit(ctx, p, feedback.Input{AttemptedAction: in.AttemptedAction, ExpectedOutcome: in.ExpectedOutcome,
		ActualOutcome: in.ActualOutcome, ToolCalled: in.ToolCalled, ErrorSeen: in.ErrorSeen, Severity: in.Severity, Rationale: in.Rationale,
		ProposalID: proposal})
	if err != nil {
		return s.refused(err), nil
	}
	return textResult("Thank you: your feedback is recorded (id "+it.ID.String()+") for the workspace's admins.",
		map[string]any{"feedback_id": it.ID.String(), "status": it.Status, "tool_known": it.ToolKnown}), nil
}
