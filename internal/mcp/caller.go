package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Caller-executed tools over MCP (docs/caller-tools.md): an agent whose
// own process runs a tool (the policy file's caller_tools) asks for
// permission to run a call, runs it with the execution ticket it gets,
// and reports the outcome. The calls are decided, held and recorded as
// any call; Gatehouse never runs them.
const (
	// RequestPermissionTool asks whether a caller tool's call may run.
	RequestPermissionTool = "request_permission"
	// ReportOutcomeTool reports what a call run with a ticket did.
	ReportOutcomeTool = "report_outcome"
)

func requestPermissionTool() *sdk.Tool {
	closed, open := false, true
	return &sdk.Tool{
		Name:  RequestPermissionTool,
		Title: "Request permission to run one of your own tools",
		Description: "Ask Gatehouse whether you may run a call of a tool that you run yourself (a caller tool of this workspace's policy file, " +
			"or your own tool that you declare with the call: its description, effect and authority; Gatehouse's own tools are called directly " +
			"instead). The call is decided like any call: it may run at once, wait for the owner's " +
			"confirmation or an approver, or be refused. When it may run, the answer carries an execution_ticket: run the tool yourself, once, " +
			"with exactly these arguments, then call report_outcome with the ticket before it expires. When it waits, call request_permission " +
			"again later with only its proposal_id (and a rationale) to learn whether you may run it.",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{argRationale},
			"properties": map[string]any{
				"tool":      map[string]any{"type": "string", "description": "The caller tool's name, such as app.send_invoice."},
				"arguments": map[string]any{"type": "object", "description": "The arguments you will run it with."},
				"proposal_id": map[string]any{"type": "string", "format": "uuid",
					"description": "Instead of tool and arguments: an earlier request that waited; the answer is its state, with its ticket once it may run."},
				"declaration": declarationSchema(),
				argIdempotencyKey: map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{16,64}$",
					"description": "Required by tools whose calls must not run twice: a key you make up for this call, sent again only to retry it."},
				argRationale: rationaleSchema(),
			}},
		Annotations: &sdk.ToolAnnotations{Title: "Request permission", ReadOnlyHint: false, DestructiveHint: &closed, IdempotentHint: false, OpenWorldHint: &open},
	}
}

func reportOutcomeTool() *sdk.Tool {
	closed := false
	return &sdk.Tool{
		Name:  ReportOutcomeTool,
		Title: "Report the outcome of a call you ran",
		Description: "After you ran a call with the execution_ticket request_permission gave you, report what happened, once: status succeeded " +
			"(with the result, or its SHA-256 as result_digest) or failed (with the error). A call not reported before its ticket expires is " +
			"marked unreported and counts against the trust in its class.",
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"proposal_id", "ticket", "status", argRationale},
			"properties": map[string]any{
				"proposal_id":   map[string]any{"type": "string", "format": "uuid", "description": "The proposal id request_permission returned."},
				"ticket":        map[string]any{"type": "string", "description": "Its execution_ticket."},
				"status":        map[string]any{"type": "string", "enum": []any{proposals.ReportSucceeded, proposals.ReportFailed}},
				"result":        map[string]any{"description": "What the tool returned (any JSON), for succeeded."},
				"result_digest": map[string]any{"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "Instead of result: its SHA-256, lower-case hex."},
				"error":         map[string]any{"type": "string", "description": "Why it failed, for failed."},
				argRationale:    rationaleSchema(),
			}},
		Annotations: &sdk.ToolAnnotations{Title: "Report an outcome", DestructiveHint: &closed, IdempotentHint: true, OpenWorldHint: &closed},
	}
}

// badRationale is the refusal of a call without a rationale.
func badRationale(what string) *sdk.CallToolResult {
	return toolError(what+": give a rationale of 10 to 500 characters saying why (the argument \"rationale\").",
		map[string]any{"code": "invalid", "errors": []map[string]string{{"field": argRationale, "message": "must have 10 to 500 characters"}}})
}

func rationaleOK(r string) bool {
	n := utf8.RuneCountInString(strings.TrimSpace(r))
	return n >= 10 && n <= 500
}

// requestPermission handles request_permission.
func (s *session) requestPermission(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p, ok := principalOf(req.Extra)
	if !ok {
		return nil, fmt.Errorf("gatehouse: the request carries no principal")
	}
	var in struct {
		Tool           string                   `json:"tool"`
		Arguments      json.RawMessage          `json:"arguments"`
		ProposalID     string                   `json:"proposal_id"`
		IdempotencyKey string                   `json:"idempotency_key"`
		Rationale      string                   `json:"rationale"`
		Declaration    *tools.CallerDeclaration `json:"declaration"`
	}
	if err := strictjson.Decode(req.Params.Arguments, &in, strictjson.Limits{}, true); err != nil {
		return toolError("Nothing was requested: pass tool, arguments and rationale (or proposal_id and rationale).", nil), nil
	}
	if !rationaleOK(in.Rationale) {
		return badRationale("Nothing was requested"), nil
	}
	rationale := strings.TrimSpace(in.Rationale)
	if in.ProposalID != "" {
		id, err := parseUUID(in.ProposalID)
		if err != nil {
			return s.refused(proposals.ErrNotFound), nil
		}
		prop, err := s.g.props.Check(ctx, p, id, rationale)
		if err != nil {
			return s.refused(err), nil
		}
		return s.permission(prop), nil
	}
	tool, ok := s.g.registry.Get(in.Tool)
	if in.Declaration != nil {
		declared, _, err := s.g.registry.DeclaredTool(in.Tool, *in.Declaration)
		if err != nil {
			return s.refused(err), nil
		}
		tool, ok = declared, true
	}
	if !ok {
		return toolError(fmt.Sprintf("No tool is named %q; request_permission is for the caller tools this workspace declares, or for your own tool declared with the call (declaration).", in.Tool), nil), nil
	}
	if !tool.Caller {
		return toolError(fmt.Sprintf("%s is run by Gatehouse, not by you: call it directly as a tool of this server (no permission to ask).", tool.Name),
			map[string]any{"code": "bad_request", "errors": []map[string]string{{"field": "tool", "message": "is not a caller tool"}}}), nil
	}
	if tool.Contract.Idempotency.Required && in.IdempotencyKey == "" {
		return toolError(fmt.Sprintf("Nothing was requested: %s is %s, so it needs an idempotency_key (16 to 64 letters, digits, _ or -) that you make up for this call.",
			tool.Name, tool.Contract.Authority),
			map[string]any{"code": "bad_request", "errors": []map[string]string{{"field": argIdempotencyKey, "message": "is required for this tool"}}}), nil
	}
	scope, err := s.bind(ctx, p)
	if err != nil {
		return nil, err
	}
	call := proposals.Input{Tool: tool.Name, Arguments: in.Arguments, Rationale: rationale, IdempotencyKey: in.IdempotencyKey, Declaration: in.Declaration}
	prop, err := s.proposeCaller(ctx, p, scope, call)
	if err != nil {
		return s.refused(err), nil
	}
	return s.permission(prop), nil
}

// proposeCaller proposes a caller tool's call, holding its idempotency key
// as the REST API does: a retry with the key gets the call as it is now.
func (s *session) proposeCaller(ctx context.Context, p auth.Principal, scope proposals.Scope, in proposals.Input) (proposals.Proposal, error) {
	propose := func(ctx context.Context) (proposals.Proposal, error) { return s.g.props.Propose(ctx, p, scope, in) }
	if in.IdempotencyKey == "" {
		return s.g.opts.Telemetry.Propose(ctx, in.Tool, propose)
	}
	if _, err := proposals.ParseIdempotencyKey(in.IdempotencyKey); err != nil {
		return proposals.Proposal{}, err
	}
	request := map[string]any{"scope": scope.Kind, "scope_id": scope.ID, "tool": in.Tool, "arguments": in.Arguments, "rationale": in.Rationale}
	if in.Declaration != nil {
		request["declaration"] = in.Declaration
	}
	hash, err := proposals.RequestHash(request)
	if err != nil {
		return proposals.Proposal{}, err
	}
	begun, err := s.g.props.BeginIdempotentCall(ctx, p, scope, in, hash)
	if err != nil {
		return proposals.Proposal{}, err
	}
	switch {
	case begun.Replay != nil:
		var body struct {
			ProposalID string `json:"proposal_id"`
		}
		_ = json.Unmarshal(begun.Replay.Body, &body)
		id, err := parseUUID(body.ProposalID)
		if err != nil {
			return proposals.Proposal{}, fmt.Errorf("gatehouse: this idempotency key answered a call that cannot be read here: use a new key for a new call")
		}
		return s.g.props.Get(ctx, p, id)
	case begun.Recorded != nil:
		return *begun.Recorded, nil
	}
	idem := begun.Held
	defer idem.Release(ctx)
	in.Idem = idem
	out, err := s.g.opts.Telemetry.Propose(ctx, in.Tool, propose)
	if out.ID != uuid.Nil && s.g.opts.StoreCall != nil {
		stored, serr := s.g.opts.StoreCall(out, err)
		if serr == nil {
			serr = idem.Store(ctx, stored)
		}
		if serr != nil {
			return proposals.Proposal{}, serr
		}
	}
	return out, err
}

// permission is request_permission's answer: the ticket when the call may
// run, otherwise the call's outcome as any tool's.
func (s *session) permission(prop proposals.Proposal) *sdk.CallToolResult {
	id := prop.ID.String()
	if t := prop.Ticket; t != nil {
		args := prop.Arguments
		if len(prop.AppliedArguments) > 0 {
			args = prop.AppliedArguments
		}
		expires := t.ExpiresAt.UTC().Format(time.RFC3339)
		data := map[string]any{"proposal_id": id, "status": prop.Status, "tool": prop.Tool, "execution_ticket": t.Value,
			"ticket_expires_at": expires, "arguments": json.RawMessage(args)}
		return textResult(fmt.Sprintf("You may run %s now, once, with exactly these arguments: %s. Then call %s with proposal_id %s, "+
			"ticket %s and the status (succeeded with the result, or failed with the error) before %s; a call not reported by then is marked unreported.",
			prop.Tool, args, ReportOutcomeTool, id, t.Value, expires), data)
	}
	switch prop.Status {
	case proposals.StatusApplying:
		return toolError(fmt.Sprintf("You hold no valid ticket for this call (proposal %s): it expired, or another token asked for it. "+
			"Do not run it; it is marked unreported when its ticket expires.", id), map[string]any{"proposal_id": id, "status": prop.Status, "tool": prop.Tool})
	case proposals.StatusPending, proposals.StatusPendingApproval:
		res := s.outcome(prop)
		if len(res.Content) > 0 && !res.IsError {
			if tc, ok := res.Content[0].(*sdk.TextContent); ok {
				tc.Text += fmt.Sprintf(" Do not run it yet: call %s with this proposal_id later; once it may run, the answer carries its ticket.", RequestPermissionTool)
			}
		}
		return res
	}
	return s.outcome(prop)
}

// reportOutcome handles report_outcome.
func (s *session) reportOutcome(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p, ok := principalOf(req.Extra)
	if !ok {
		return nil, fmt.Errorf("gatehouse: the request carries no principal")
	}
	var in struct {
		ProposalID   string          `json:"proposal_id"`
		Ticket       string          `json:"ticket"`
		Status       string          `json:"status"`
		Result       json.RawMessage `json:"result"`
		ResultDigest string          `json:"result_digest"`
		Error        string          `json:"error"`
		Rationale    string          `json:"rationale"`
	}
	if err := strictjson.Decode(req.Params.Arguments, &in, strictjson.Limits{}, true); err != nil {
		return toolError("Nothing was reported: pass proposal_id, ticket, status and rationale.", nil), nil
	}
	if !rationaleOK(in.Rationale) {
		return badRationale("Nothing was reported"), nil
	}
	id, err := parseUUID(in.ProposalID)
	if err != nil {
		return s.refused(proposals.ErrNotFound), nil
	}
	prop, err := s.g.props.ReportOutcome(ctx, p, id, proposals.Report{Ticket: in.Ticket, Status: in.Status, Result: in.Result,
		ResultDigest: in.ResultDigest, Error: in.Error, Rationale: strings.TrimSpace(in.Rationale)})
	if err != nil {
		return s.refused(err), nil
	}
	return textResult(fmt.Sprintf("Recorded: the call is %s (proposal %s).", prop.Status, prop.ID),
		map[string]any{"proposal_id": prop.ID.String(), "status": prop.Status, "tool": prop.Tool}), nil
}

// offersCallerTools reports whether a session is offered
// request_permission and report_outcome: the policy file declares caller
// tools, or callers may declare their own and the token may call one (it
// is not scoped to tools Gatehouse runs only).
func (g *Gateway) offersCallerTools(scope *policy.TokenScope) bool {
	if len(g.registry.CallerTools()) > 0 {
		return true
	}
	if g.registry.DeclarationsRefused() {
		return false
	}
	if scope == nil || len(scope.Tools) == 0 {
		return true
	}
	for _, name := range scope.Tools {
		if g.registry.MayDeclare(name) {
			return true
		}
	}
	return false
}

// declarationSchema is request_permission's declaration argument: the
// caller's own tool, declared with the call.
func declarationSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "required": []any{"description", "effect", "authority"},
		"description": "Your own tool, declared with the call when the policy file does not declare it (it can only tighten what the file says of a tool of that name).",
		"properties": map[string]any{
			"name":        map[string]any{"type": "string", "description": "The tool's name again (optional): it must be tool."},
			"description": map[string]any{"type": "string", "maxLength": 1000, "description": "What the tool does, for the person who may be asked."},
			"effect":      map[string]any{"type": "string", "enum": []any{"read", "mutate", "destructive"}},
			"authority": map[string]any{"type": "string", "enum": []any{"read", "write-idempotent", "write-non-idempotent", "irreversible"},
				"description": "read for a read; write-idempotent or write-non-idempotent for a change; write-non-idempotent or irreversible for a destructive one."},
			"action_class": map[string]any{"type": "string", "description": "A registered action class (read.context for a read, tool.call.local for a change by default)."},
			"schema":       map[string]any{"type": "object", "description": "The JSON Schema of the arguments (type: object)."},
		}}
}
