package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/views"
)

func TestToolsPage_ListsEveryToolWithItsEffectAndArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	resp, _ := e.client().get("/tools")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Fatalf("signed out: status %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	member := e.user("member@example.com", auth.RoleMember)
	resp, body := member.get("/tools")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d\n%s", resp.StatusCode, body)
	}
	body = html.UnescapeString(body)
	if !strings.Contains(body, `href="/tools" aria-current="page"`) {
		t.Error("the header does not mark Tools as the current page")
	}
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range registry.List() {
		card, ok := section(body, `id="tool-`+tool.Name+`"`, "</article>")
		if !ok {
			t.Errorf("%s is not listed", tool.Name)
			continue
		}
		if !strings.Contains(card, `data-effect="`+string(tool.Effect)+`">`+views.EffectWords(string(tool.Effect))+"<") {
			t.Errorf("%s does not show its effect %s in words", tool.Name, tool.Effect)
		}
		// Where a stricter layer than the owner's setting holds the call,
		// the page says so.
		if tool.Contract.Risk == "high" && !strings.Contains(card, "High risk: waits for an approver") {
			t.Errorf("%s is high risk and the page does not say it waits for an approver", tool.Name)
		}
		if tool.Name == "payment.initiate" && !strings.Contains(card, "human-only: no setting runs it") {
			t.Errorf("payment.initiate does not say only a person performs it")
		}
		if tool.Effect == "destructive" && strings.Contains(card, "in every notebook") {
			t.Errorf("%s promises what an autonomous notebook does not keep", tool.Name)
		}
		if !strings.Contains(card, "<dt>Authority</dt><dd>"+string(tool.Contract.Authority)+"</dd>") ||
			!strings.Contains(card, "<dt>Audit kept</dt>") {
			t.Errorf("%s does not show its contract", tool.Name)
		}
		if !strings.Contains(card, tool.Description) {
			t.Errorf("%s does not show its description", tool.Name)
		}
		for _, p := range tool.Params() {
			if !strings.Contains(card, "<code>"+p.Name+"</code>") {
				t.Errorf("%s does not list its argument %s", tool.Name, p.Name)
			}
		}
	}
}

// section returns the text from start up to the next end.
func section(body, start, end string) (string, bool) {
	i := strings.Index(body, start)
	if i < 0 {
		return "", false
	}
	rest := body[i:]
	if j := strings.Index(rest, end); j >= 0 {
		rest = rest[:j]
	}
	return rest, true
}
