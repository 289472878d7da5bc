//go:build node

package web_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// The TypeScript SDK checks a tool's structuredContent against the output
// schema it was listed with, and throws on a mismatch, whether the result
// is an error or not. Through Gatehouse it accepts an upstream tool's own
// result (carried through unchanged), the answer of a call that waits for
// an approver, and a refusal: all match the schema Gatehouse lists.
func TestNode_TSClientChecksUpstreamStructuredContentAgainstTheListedSchema(t *testing.T) {
	t.Parallel()
	_, url := outputUpstream(t)
	e, _ := newEnvPolicy(t, fmt.Sprintf(outputPolicy, url))
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	calls, _ := json.Marshal([]map[string]any{
		{"name": "files.stat", "arguments": map[string]any{"path": "a.txt", "rationale": "check the file's size first"}},
		{"name": "files.wipe", "arguments": map[string]any{"path": "a.txt", "rationale": "the owner asked to wipe it", "idempotency_key": "wipe-a-txt-0000000001"}},
		{"name": "files.wipe", "arguments": map[string]any{"path": "a.txt", "rationale": "the owner asked to wipe it"}},
	})
	var got struct {
		WithOutputSchema []string `json:"withOutputSchema"`
		Results          []struct {
			Name       string         `json:"name"`
			IsError    bool           `json:"isError"`
			Structured map[string]any `json:"structured"`
			Error      string         `json:"error"`
		} `json:"results"`
		Error string `json:"error"`
	}
	out := nodeRun(t, "output-client.mjs", e.url+"/mcp", agent, string(calls))
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the client's output: %v: %s", err, out)
	}
	if got.Error != "" || len(got.Results) != 3 {
		t.Fatalf("TS client: %s", out)
	}
	if !slices.Contains(got.WithOutputSchema, "files.stat") || !slices.Contains(got.WithOutputSchema, "files.wipe") {
		t.Errorf("listed with an output schema: %v", got.WithOutputSchema)
	}
	for _, r := range got.Results {
		if r.Error != "" {
			t.Errorf("the SDK refused the result of %s: %s", r.Name, r.Error)
		}
	}
	if r := got.Results[0]; r.IsError || !reflect.DeepEqual(r.Structured, statResult) {
		t.Errorf("stat: %+v, want the upstream's %v", r, statResult)
	}
	if r := got.Results[1]; r.IsError || r.Structured["status"] != "pending_approval" {
		t.Errorf("wipe: %+v", r)
	}
	if r := got.Results[2]; !r.IsError || r.Structured["code"] != "bad_request" {
		t.Errorf("wipe without a key: %+v", r)
	}
}
