package web_test

import (
	"slices"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// Cheatsheets over MCP beyond reading them: the template lists them, its
// name argument completes to the tools that have one (by prefix), and a
// client may subscribe to a cheatsheet (to be told when it changes) but
// not to a URI Gatehouse does not serve. Other completions (Gatehouse has
// no prompts) answer no values rather than an error.
func TestMCP_CheatsheetsCompleteAndTakeSubscriptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	s := e.mustMCP(agent, "claude-code", nil)
	ctx := t.Context()

	caps := s.InitializeResult().Capabilities
	if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		t.Fatalf("capabilities: %+v", caps)
	}
	templates, err := s.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "gatehouse://tools/{name}/cheatsheet" {
		t.Fatalf("templates: %+v %v", templates, err)
	}
	ref := &sdk.CompleteReference{Type: "ref/resource", URI: "gatehouse://tools/{name}/cheatsheet"}
	got, err := s.Complete(ctx, &sdk.CompleteParams{Ref: ref, Argument: sdk.CompleteParamsArgument{Name: "name", Value: "records."}})
	if err != nil || !slices.Contains(got.Completion.Values, "records.put") || !slices.Contains(got.Completion.Values, "records.get") ||
		slices.ContainsFunc(got.Completion.Values, func(v string) bool { return len(v) < 8 || v[:8] != "records." }) ||
		got.Completion.Total != len(got.Completion.Values) {
		t.Fatalf("completion of records.: %+v %v", got, err)
	}
	got, err = s.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/prompt", Name: "nope"}, Argument: sdk.CompleteParamsArgument{Name: "x", Value: "y"}})
	if err != nil || got.Completion.Values == nil || len(got.Completion.Values) != 0 {
		t.Fatalf("completion of a prompt: %+v %v", got, err)
	}

	if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: "gatehouse://tools/records.put/cheatsheet"}); err != nil {
		t.Fatalf("subscribe to a cheatsheet: %v", err)
	}
	if err := s.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "gatehouse://tools/records.put/cheatsheet"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	for _, uri := range []string{"gatehouse://tools/nope.nope/cheatsheet", "test://watched-resource", "file:///etc/passwd"} {
		if err := s.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err == nil {
			t.Errorf("subscribed to %s, which Gatehouse does not serve", uri)
		}
	}
}
