package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/web/client"
)

// bearer is a client that sends the token with every request.
func bearer(t *testing.T, base, token string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(base, client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The main flow through the client generated from openapi.yaml: a user's
// script opens a conversation, an agent proposes a change, the owner
// applies it.
func TestGeneratedClient_CreateConversationProposeApply(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"DATABASE_URL": dbtest.MustURL(t)})
	s.cli(t, "a long enough password\n", "user", "create", "--email", "ana@example.com")
	user := bearer(t, s.URL, strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "user", "--name", "script")))
	agent := bearer(t, s.URL, strings.TrimSpace(s.cli(t, "", "token", "create", "--email", "ana@example.com", "--kind", "agent", "--name", "bot")))
	ctx := context.Background()

	title := "notes"
	conv, err := user.CreateConversationWithResponse(ctx, client.CreateConversationJSONRequestBody{Title: &title})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v %s", err, conv.Body)
	}
	id := conv.JSON201.Id.String()

	rationale := "keep the customer's note"
	call, err := agent.ProposeToolCallWithResponse(ctx, id, client.ProposeToolCallJSONRequestBody{
		Tool: "records.put", Rationale: &rationale,
		Arguments: map[string]any{"collection": "notes", "key": "k1", "value": map[string]any{"text": "call back"}},
	})
	if err != nil || call.JSON202 == nil {
		t.Fatalf("propose: %v %d %s", err, call.StatusCode(), call.Body)
	}
	if call.JSON202.Status != client.ProposalStatusPending || call.JSON202.ConfirmUrl == nil {
		t.Fatalf("proposed: %+v", call.JSON202)
	}
	pid := call.JSON202.ProposalId.String()

	// An agent cannot confirm its own call.
	if r, err := agent.ApplyProposalWithResponse(ctx, pid, client.ApplyProposalJSONRequestBody{}); err != nil || r.StatusCode() != http.StatusForbidden ||
		r.ApplicationproblemJSONDefault == nil || r.ApplicationproblemJSONDefault.Type != "urn:gatehouse:problem:forbidden" {
		t.Fatalf("agent apply: %v %d %s", err, r.StatusCode(), r.Body)
	}
	applied, err := user.ApplyProposalWithResponse(ctx, pid, client.ApplyProposalJSONRequestBody{})
	if err != nil || applied.JSON200 == nil || applied.JSON200.Status != client.ProposalStatusApplied {
		t.Fatalf("apply: %v %d %s", err, applied.StatusCode(), applied.Body)
	}
	got, err := agent.GetProposalWithResponse(ctx, pid, nil)
	if err != nil || got.JSON200 == nil || got.JSON200.Status != client.ProposalStatusApplied {
		t.Fatalf("get proposal: %v %s", err, got.Body)
	}
}
