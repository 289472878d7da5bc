package web_test

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// adrCheatsheetFirst is ADR-036's opening of a tool description (Decision
// 4), word for word, around the cheatsheet's address.
const adrCheatsheetFirst = "Before any write or non-trivial query, fetch %s first. Do NOT guess property names or association types."

// Every built-in tool listed over MCP opens its description with
// ADR-036's full sentence naming its own cheatsheet, and says how
// Gatehouse decides its calls: a high-risk one waits for an approver, a
// payment (human-only) for the principal.
func TestToolDescriptions_OpenWithADR036sCheatsheetSentence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	byName, _ := listTools(t, e.mustMCP(e.token("owner@example.com", auth.TokenAgent), "descriptions", nil))
	builtin := []string{"records.search", "records.get", "records.put", "notes.append", "records.delete", "records.bulk_delete",
		"email.send", "webhook.post", "payment.initiate"}
	high := map[string]bool{"records.delete": true, "records.bulk_delete": true, "email.send": true, "webhook.post": true}
	for _, name := range builtin {
		tool := byName[name]
		if tool == nil {
			t.Errorf("%s is not listed", name)
			continue
		}
		want := strings.Replace(adrCheatsheetFirst, "%s", "gatehouse://tools/"+name+"/cheatsheet", 1) + " "
		if !strings.HasPrefix(tool.Description, want) {
			t.Errorf("%s's description does not open with ADR-036's sentence:\n%s", name, tool.Description)
		}
		if says := strings.Contains(tool.Description, "high risk; every call waits for an approver"); says != high[name] {
			t.Errorf("%s's description says it waits for an approver: %v, want %v:\n%s", name, says, high[name], tool.Description)
		}
		if says := strings.Contains(tool.Description, "human-only; the principal performs it"); says != (name == "payment.initiate") {
			t.Errorf("%s's description says it is human-only: %v:\n%s", name, says, tool.Description)
		}
	}
}

// The REST listing opens each description with the same sentence, naming
// the REST cheatsheet.
func TestToolDescriptions_RESTOpensWithADR036sCheatsheetSentence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	resp, body := e.api("GET", "/api/v1/tools", e.token("owner@example.com", auth.TokenAgent), nil)
	list, _ := body["tools"].([]any)
	if resp.StatusCode != 200 || len(list) == 0 {
		t.Fatalf("tools: %d %v", resp.StatusCode, body)
	}
	for _, x := range list {
		tool := x.(map[string]any)
		url, _ := tool["cheatsheet_url"].(string)
		if url == "" {
			continue
		}
		want := strings.Replace(adrCheatsheetFirst, "%s", url, 1) + " "
		if !strings.HasPrefix(tool["description"].(string), want) {
			t.Errorf("%s's description does not open with ADR-036's sentence:\n%s", tool["name"], tool["description"])
		}
	}
}
