package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// How a call's outcome becomes a tool result. Whatever a person still has
// to do is a result, not an error: the call is in good hands, and the model
// should wait (check_proposal) rather than retry. Whatever did not and will
// not run (a refusal, a failure, a rejection, an expiry) is a tool error
// carrying why, so the model can adapt.

func parseUUID(s string) (uuid.UUID, error) { return uuid.Parse(strings.TrimSpace(s)) }

// outcome is the tool result for a proposal as it is now.
func (s *session) outcome(p proposals.Proposal) *sdk.CallToolResult {
	data := map[string]any{"proposal_id": p.ID.String(), "status": p.Status, "tool": p.Tool}
	id := p.ID.String()
	switch p.Status {
	case proposals.StatusApplied:
		return s.applied(p, data)
	case proposals.StatusFailed:
		data["error"] = p.Error
		return toolError(fmt.Sprintf("The call failed: %s (proposal %s)", strings.TrimSuffix(p.Error, "."), id), data)
	case proposals.StatusRejected:
		data["rejection_reason"] = p.RejectionReason
		return toolError(fmt.Sprintf("The call was rejected and did not run: %s (proposal %s). Do not retry it as it was.", strings.TrimSuffix(p.RejectionReason, "."), id), data)
	case proposals.StatusExpired:
		return toolError(fmt.Sprintf("Nobody approved the call in time; it did not run (proposal %s).", id), data)
	case proposals.StatusApplying:
		return textResult(fmt.Sprintf("The call was claimed to run, but its outcome is not recorded yet (proposal %s). "+
			"If it stays so, an admin reviews it; it is never run twice. Call %s with this id later.", id, CheckProposalTool), data)
	case proposals.StatusPendingApproval:
		role := "approver"
		if p.Packet != nil {
			role = p.Packet.ApproverRole
			data["approval_id"] = p.Packet.ID.String()
			data["summary"] = p.Packet.Summary
			data["expires_at"] = p.Packet.ExpiresAt.UTC().Format(time.RFC3339)
			if s.g.opts.ApprovalURL != nil {
				data["approval_url"] = s.absolute(s.g.opts.ApprovalURL(p.Packet.ID))
			}
		}
		data["approver_role"] = role
		text := fmt.Sprintf("The call waits for an approver with the role %q and has not run. %s Proposal %s", role, why(p.Decision, policy.StateDeferred), id)
		if u, ok := data["approval_url"].(string); ok {
			text += fmt.Sprintf("; the approver decides at %s", u)
		}
		if p.Packet != nil {
			text += fmt.Sprintf(" before %s", p.Packet.ExpiresAt.UTC().Format(time.RFC3339))
			if n := p.Packet.Needed; n > 1 {
				data["approvals_needed"] = n
				text += fmt.Sprintf(" (it needs %d distinct approvers)", n)
			}
			if at := p.Packet.EscalatedAt; at != nil {
				data["escalated_to"], data["escalated_at"] = p.Packet.EscalatedTo, at.UTC().Format(time.RFC3339)
				text += fmt.Sprintf("; still waiting: escalated to the %s role at %s", p.Packet.EscalatedTo, at.UTC().Format(time.RFC3339))
			}
		}
		return textResult(text+fmt.Sprintf(". Call %s with this id later for the outcome.", CheckProposalTool), data)
	case proposals.StatusPending:
		if p.State() == policy.StateHumanOnly {
			return toolError(fmt.Sprintf("Only a person can perform this action; you cannot run it. %s The prepared action (proposal %s) waits for the principal.",
				why(p.Decision, policy.StateHumanOnly), id), data)
		}
		if s.g.opts.ProposalURL != nil {
			data["confirm_url"] = s.absolute(s.g.opts.ProposalURL(p))
		}
		text := fmt.Sprintf("The call waits for the owner's confirmation and has not run. %s Proposal %s", why(p.Decision, policy.StateReviewRequired), id)
		if u, ok := data["confirm_url"].(string); ok {
			text += fmt.Sprintf("; the owner confirms or rejects it at %s", u)
		}
		return textResult(text+fmt.Sprintf(". Call %s with this id later for the outcome.", CheckProposalTool), data)
	}
	return textResult(fmt.Sprintf("The call is %s (proposal %s).", p.Status, id), data)
}

// applied is the result of a call that ran: an upstream tool's own
// content as the upstream answered it, any other tool's result as JSON.
func (s *session) applied(p proposals.Proposal, data map[string]any) *sdk.CallToolResult {
	if p.DryRun {
		data["dry_run"] = true
	}
	if tool, ok := s.g.registry.Get(p.Tool); ok && tool.Upstream != "" {
		var res sdk.CallToolResult
		if err := json.Unmarshal(p.Result, &res); err == nil && (len(res.Content) > 0 || res.StructuredContent != nil) {
			res.Meta = sdk.Meta{"gatehouse/proposal_id": p.ID.String()}
			return &res
		}
	}
	var result any
	if len(p.Result) > 0 {
		result = json.RawMessage(p.Result)
	}
	data["result"] = result
	text, err := json.Marshal(data)
	if err != nil {
		text = p.Result
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(text)}}, StructuredContent: data}
}

// why is the reason of the decision's layers that put the call in state
// (the strictest first), in one or two sentences.
func why(d *policy.Decision, state policy.State) string {
	if d == nil {
		return ""
	}
	var reasons []string
	for _, l := range d.Layers {
		if l.State == state {
			reasons = append(reasons, l.Reason)
		}
	}
	return strings.Join(reasons, " ")
}

// refused is the tool error for a call that was not made or may not run:
// the service's message (safe to show), every layer's reason that held it
// back, the fields at fault and when to retry.
func (s *session) refused(err error) *sdk.CallToolResult {
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		s.g.log.Error("mcp: tool call failed", "err", err)
		return toolError("Internal error: the call could not be made. Retry later.", map[string]any{"code": apperr.EINTERNAL})
	}
	data := map[string]any{"code": ae.Code, "message": ae.Message}
	var b strings.Builder
	b.WriteString("The call was refused: ")
	b.WriteString(ae.Message)
	if d := decisionOf(ae.Extra["decision"]); d != nil {
		data["decision"] = d
		var lines []string
		for _, l := range d.Holding() {
			lines = append(lines, fmt.Sprintf("- %s (%s): %s", l.Layer, l.State, l.Reason))
		}
		if len(lines) > 0 {
			b.WriteString("\nWhy:\n" + strings.Join(lines, "\n"))
		}
	}
	if len(ae.Fields) > 0 {
		data["errors"] = ae.Fields
		b.WriteString("\nFields:")
		for _, f := range ae.Fields {
			fmt.Fprintf(&b, "\n- %s: %s", f.Field, f.Message)
		}
	}
	for _, k := range []string{"retry_after", "constraint", "proposal_id", "proposal_status"} {
		if v, ok := ae.Extra[k]; ok {
			data[k] = v
		}
	}
	if secs, ok := ae.Extra["retry_after"].(int); ok {
		fmt.Fprintf(&b, "\nRetry in %d s at the earliest.", secs)
	}
	return toolError(b.String(), data)
}

// decisionOf reads a refusal's decision, whatever form it travels in.
func decisionOf(v any) *policy.Decision {
	switch d := v.(type) {
	case policy.Decision:
		return &d
	case *policy.Decision:
		return d
	case nil:
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var d policy.Decision
	if json.Unmarshal(b, &d) != nil || d.State == "" {
		return nil
	}
	return &d
}
