package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/policy"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/telemetry"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The arguments Gatehouse adds to every tool: the caller's rationale, and
// for tools that require one, the idempotency key. Both are taken out
// before the call is proposed; the tool runs with the rest.
const (
	argRationale      = "rationale"
	argIdempotencyKey = "idempotency_key"
	// CheckProposalTool reads a proposal's outcome later.
	CheckProposalTool = "check_proposal"
)

// ReservedArgument reports whether name is an argument Gatehouse adds to
// every tool, so no tool may have one of its own by that name.
func ReservedArgument(name string) bool { return name == argRationale || name == argIdempotencyKey }

// mcpTool is a registry tool as MCP clients list it.
func (g *Gateway) mcpTool(t *tools.Tool) *sdk.Tool {
	def := &sdk.Tool{
		Name:        t.Name,
		Title:       toolTitle(t),
		Description: toolDescription(t, g.registry.Classes()),
		InputSchema: inputSchema(t),
		Annotations: g.annotations(t),
	}
	if t.Upstream != "" {
		if out := g.upstreams.OutputSchema(t.Name); out != nil {
			def.OutputSchema = outputSchema(t.Name, out)
		}
	}
	return def
}

// toolTitle is the tool's title, or one made from its name
// ("records.bulk_delete" → "Records: bulk delete").
func toolTitle(t *tools.Tool) string {
	if t.Title != "" {
		return t.Title
	}
	group, name, ok := strings.Cut(t.Name, ".")
	if !ok {
		group, name = "", t.Name
	}
	name = strings.ReplaceAll(name, "_", " ")
	if group == "" {
		return capitalize(name)
	}
	return capitalize(strings.ReplaceAll(group, "_", " ")) + ": " + name
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// CheatsheetURI is where an MCP client reads a tool's cheatsheet.
func CheatsheetURI(tool string) string { return "gatehouse://tools/" + tool + "/cheatsheet" }

// toolDescription is the tool's description, opened by its cheatsheet's
// address when it has one, and closed by how Gatehouse decides its calls
// (a human-only class first, then high risk: those gates hold whatever
// the mode).
func toolDescription(t *tools.Tool, classes *policy.ClassRegistry) string {
	var b strings.Builder
	if t.Cheatsheet != "" {
		b.WriteString(tools.CheatsheetFirst(CheatsheetURI(t.Name)) + " ")
	}
	b.WriteString(t.Description)
	group, _ := classes.Group(t.Contract.ActionClass)
	switch {
	case group == policy.GroupHumanOnly:
		b.WriteString(" (Gatehouse: human-only; the principal performs it, never the agent.)")
	case t.Contract.Risk == policy.RiskHigh:
		b.WriteString(" (Gatehouse: high risk; every call waits for an approver unless the workspace auto-approves high risk.)")
	case t.Effect == policy.EffectRead:
		b.WriteString(" (Gatehouse: a read; it runs at once.)")
	case t.Effect == policy.EffectMutate:
		b.WriteString(" (Gatehouse: a change; it runs at once where the owner allows it, otherwise it waits for their confirmation.)")
	case t.Effect == policy.EffectDestructive:
		b.WriteString(" (Gatehouse: destructive; a person confirms every call.)")
	}
	return b.String()
}

// rationaleSchema is the rationale every tool takes, check_proposal too.
func rationaleSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 10, "maxLength": 500,
		"description": "Why you make this call, for the person who reviews it and for the audit log (10 to 500 characters)."}
}

// inputSchema is the tool's argument schema with Gatehouse's own
// arguments added: rationale always, idempotency_key where the tool
// requires a key. Both are required.
func inputSchema(t *tools.Tool) map[string]any {
	var schema map[string]any
	if err := json.Unmarshal(t.Schema, &schema); err != nil || schema == nil {
		schema = map[string]any{"type": "object"}
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	required, _ := schema["required"].([]any)
	props[argRationale] = rationaleSchema()
	required = append(required, argRationale)
	if t.Contract.Idempotency.Required {
		props[argIdempotencyKey] = map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{16,64}$",
			"description": "A key you make up for this call (16 to 64 letters, digits, _ or -). Send the same key again only to retry the same call: it then runs at most once."}
		required = append(required, argIdempotencyKey)
	}
	schema["properties"], schema["required"] = props, required
	return schema
}

// annotations are the hints MCP clients read, from the tool's contract.
func (g *Gateway) annotations(t *tools.Tool) *sdk.ToolAnnotations {
	destructive := t.Effect == policy.EffectDestructive
	open := t.Outside() || g.external(t)
	return &sdk.ToolAnnotations{
		Title:           toolTitle(t),
		ReadOnlyHint:    t.Effect == policy.EffectRead,
		DestructiveHint: &destructive,
		IdempotentHint:  t.Contract.Authority == policy.AuthorityRead || t.Contract.Authority == policy.AuthorityWriteIdempotent,
		OpenWorldHint:   &open,
	}
}

// external reports whether any class the tool's calls can fall in is in
// the external group.
func (g *Gateway) external(t *tools.Tool) bool {
	classes := append([]string{t.Contract.ActionClass}, t.Contract.ActionClasses...)
	for _, c := range classes {
		if group, ok := g.registry.Classes().Group(c); ok && group == policy.GroupExternal {
			return true
		}
	}
	return false
}

func checkProposalTool() *sdk.Tool {
	closed := false
	return &sdk.Tool{
		Name:  CheckProposalTool,
		Title: "Check a proposal",
		Description: "Read what became of a call that waited (for the owner's confirmation or an approver): " +
			"its status, and its result or why it did not run. Pass the proposal id the call returned, and a rationale like every call.",
		// A rationale like every tool (ADR-036 Decision 1), kept in the
		// audit log with the check.
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"proposal_id", argRationale},
			"properties": map[string]any{"proposal_id": map[string]any{"type": "string", "format": "uuid", "description": "The proposal id a tool call returned"},
				argRationale: rationaleSchema()}},
		Annotations: &sdk.ToolAnnotations{Title: "Check a proposal", ReadOnlyHint: true, DestructiveHint: &closed, IdempotentHint: true, OpenWorldHint: &closed},
	}
}

// splitArguments takes Gatehouse's own arguments out of a call's
// arguments: what remains is what the tool runs with. The arguments are
// read as strictly as every JSON body (strictjson), so a duplicate key or
// a NUL cannot mean one thing here and another in the tool.
func splitArguments(raw json.RawMessage) (args json.RawMessage, rationale, key string, err error) {
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := strictjson.Decode(raw, &fields, strictjson.Limits{}, false); err != nil {
			var se *strictjson.Error
			if errors.As(err, &se) && json.Valid(raw) && bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
				where := "the arguments"
				if se.Path != "" {
					where = strconv.Quote(se.Path)
				}
				return nil, "", "", fmt.Errorf("%s: %s", where, se.Reason)
			}
			return nil, "", "", fmt.Errorf("the arguments must be a JSON object")
		}
	}
	if v, ok := fields[argRationale]; ok {
		if json.Unmarshal(v, &rationale) != nil {
			return nil, "", "", fmt.Errorf("rationale must be a string")
		}
		delete(fields, argRationale)
	}
	if v, ok := fields[argIdempotencyKey]; ok {
		if json.Unmarshal(v, &key) != nil {
			return nil, "", "", fmt.Errorf("idempotency_key must be a string")
		}
		delete(fields, argIdempotencyKey)
	}
	args, err = json.Marshal(fields)
	if err != nil {
		return nil, "", "", fmt.Errorf("the arguments cannot be encoded")
	}
	return args, rationale, key, nil
}

// toolError is a tool result that tells the model the call did not run,
// and why; data is its structured form.
func toolError(text string, data map[string]any) *sdk.CallToolResult {
	res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	if data != nil {
		res.StructuredContent = data
	}
	return res
}

// textResult is a tool result of one text, with its structured form.
func textResult(text string, data map[string]any) *sdk.CallToolResult {
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	if data != nil {
		res.StructuredContent = data
	}
	return res
}

// callTool proposes a call of the tool in the session's scope and says
// what became of it.
func (s *session) callTool(name string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p, ok := principalOf(req.Extra)
		if !ok {
			return nil, fmt.Errorf("gatehouse: the request carries no principal")
		}
		// The SDK ends this context when the agent cancels the call
		// (notifications/cancelled; under 2026-07-28, by closing its
		// request) or ends its session, not when a 2025-11-25 session's
		// connection drops: an upstream call is cancelled with it.
		ctx = proposals.ForwardsCancellation(ctx)
		if req.Extra != nil {
			ctx = telemetry.Extract(ctx, req.Extra.Header) // inside the agent's trace
		}
		tool, ok := s.g.registry.Get(name)
		if !ok {
			return toolError(fmt.Sprintf("No tool is named %q any more; list the tools again.", name), nil), nil
		}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			ss := req.Session
			ctx = WithProgress(ctx, func(progress, total float64, message string) {
				if ctx.Err() == nil { // the call has not been answered yet
					ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: progress, Total: total, Message: message})
				}
			})
		}
		args, rationale, key, err := splitArguments(req.Params.Arguments)
		if err != nil {
			return toolError("The call was not made: "+err.Error()+".", nil), nil
		}
		if n := utf8.RuneCountInString(strings.TrimSpace(rationale)); n < 10 {
			return toolError("The call was not made: give a rationale of 10 to 500 characters saying why you make this call (the argument \"rationale\").",
				map[string]any{"code": "invalid", "errors": []map[string]string{{"field": argRationale, "message": "must have 10 to 500 characters"}}}), nil
		}
		if tool.Contract.Idempotency.Required && key == "" {
			return toolError(fmt.Sprintf("The call was not made: %s is %s, so it needs an idempotency_key (16 to 64 letters, digits, _ or -) that you make up for this call and send again only to retry it.",
				tool.Name, tool.Contract.Authority),
				map[string]any{"code": "bad_request", "errors": []map[string]string{{"field": argIdempotencyKey, "message": "is required for this tool"}}}), nil
		}
		if key != "" {
			if _, err := proposals.ParseIdempotencyKey(key); err != nil {
				return s.refused(err), nil
			}
		}
		if tool.Upstream != "" && s.g.upstreams != nil {
			if err := s.g.upstreams.Callable(ctx, tool); err != nil {
				return s.refused(err), nil
			}
		}
		// The stateless revision's multi-round trip, where the client can
		// open a URL for its person (otherwise: pending and check_proposal).
		multiRound := req.ProtocolVersion() >= protocolStateless && s.g.cursorKey != nil
		elicits := false
		if caps := req.ClientCapabilities(); caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil {
			elicits = true
		}
		var digest []byte
		if multiRound {
			if digest, err = argumentsDigest(args); err != nil {
				return toolError("The call was not made: its arguments are not valid JSON.", nil), nil
			}
			if req.Params.RequestState != "" {
				return s.retry(ctx, p, tool.Name, digest, req.Params.RequestState)
			}
			if ci := req.ClientInfo(); ci != nil && s.stateless {
				s.mu.Lock()
				s.client = ci.Name
				s.mu.Unlock()
			}
		}
		scope, err := s.bind(ctx, p)
		if err != nil {
			return nil, err
		}
		res, err := s.propose(ctx, p, scope, proposals.Input{Tool: tool.Name, Arguments: args, Rationale: rationale, IdempotencyKey: key})
		if err != nil || !multiRound || !elicits {
			return res, err
		}
		// The stateless revision: a call that waits asks for the person's
		// decision (input required), and its retry reads the outcome.
		return s.inputRequired(ctx, p, tool.Name, digest, res)
	}
}

// propose runs the call through the propose → apply service, holding its
// idempotency key (if any) as the REST API does: a retry with the same key
// and the same call gets the call's outcome and runs nothing again.
func (s *session) propose(ctx context.Context, p auth.Principal, scope proposals.Scope, in proposals.Input) (*sdk.CallToolResult, error) {
	if in.IdempotencyKey != "" {
		hash, err := proposals.RequestHash(map[string]any{"scope": scope.Kind, "scope_id": scope.ID, "tool": in.Tool, "arguments": in.Arguments, "rationale": in.Rationale})
		if err != nil {
			return nil, err
		}
		begun, err := s.g.props.BeginIdempotent(ctx, p, scope, in.Tool, in.IdempotencyKey, hash)
		if err != nil {
			return s.refused(err), nil
		}
		switch {
		case begun.Replay != nil:
			return s.replay(ctx, p, *begun.Replay), nil
		case begun.Recorded != nil:
			return s.outcome(*begun.Recorded), nil
		}
		idem := begun.Held
		defer idem.Release(ctx) // a call refused before it recorded anything stores nothing
		in.Idem = idem
		out, err := s.g.opts.Telemetry.Propose(ctx, in.Tool, func(ctx context.Context) (proposals.Proposal, error) { return s.g.props.Propose(ctx, p, scope, in) })
		if out.ID != uuid.Nil && s.g.opts.StoreCall != nil {
			stored, serr := s.g.opts.StoreCall(out, err)
			if serr == nil {
				serr = idem.Store(ctx, stored)
			}
			if serr != nil {
				return nil, serr
			}
		}
		if err != nil {
			return s.refused(err), nil
		}
		return s.outcome(out), nil
	}
	out, err := s.g.opts.Telemetry.Propose(ctx, in.Tool, func(ctx context.Context) (proposals.Proposal, error) { return s.g.props.Propose(ctx, p, scope, in) })
	if err != nil {
		return s.refused(err), nil
	}
	return s.outcome(out), nil
}

// replay answers a retry whose key finished already: with the recorded
// call's outcome as it is now (the stored answer names the proposal).
func (s *session) replay(ctx context.Context, p auth.Principal, stored proposals.StoredResponse) *sdk.CallToolResult {
	var body struct {
		ProposalID string `json:"proposal_id"`
		Detail     string `json:"detail"`
	}
	_ = json.Unmarshal(stored.Body, &body)
	if id, err := parseUUID(body.ProposalID); err == nil {
		if prop, err := s.g.props.Get(ctx, p, id); err == nil {
			return s.outcome(prop)
		}
	}
	if body.Detail != "" {
		return toolError("This idempotency key answered before: "+body.Detail, nil)
	}
	return toolError("This idempotency key was used for a call whose answer cannot be read here; use a new key for a new call.", nil)
}

// checkProposal handles check_proposal: the proposal's outcome, read
// with a rationale like every other tool (ADR-036), which is audited.
func (s *session) checkProposal(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	p, ok := principalOf(req.Extra)
	if !ok {
		return nil, fmt.Errorf("gatehouse: the request carries no principal")
	}
	var in struct {
		ProposalID string `json:"proposal_id"`
		Rationale  string `json:"rationale"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.ProposalID == "" {
		return toolError("Pass the proposal_id a tool call returned.", nil), nil
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(in.Rationale)); n < 10 || n > 500 {
		return toolError("The proposal was not read: give a rationale of 10 to 500 characters saying why you check it now (the argument \"rationale\").",
			map[string]any{"code": "invalid", "errors": []map[string]string{{"field": argRationale, "message": "must have 10 to 500 characters"}}}), nil
	}
	id, err := parseUUID(in.ProposalID)
	if err != nil {
		return s.refused(proposals.ErrNotFound), nil
	}
	prop, err := s.g.props.Check(ctx, p, id, strings.TrimSpace(in.Rationale))
	if err != nil {
		return s.refused(err), nil
	}
	return s.outcome(prop), nil
}
