package web_test

import (
	"fmt"
	"html"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// /tools shows why each tool has its authority class, how its effect is
// undone and which of its fields hold personal data.
func TestToolsPage_ShowsWhyEachToolHasItsClass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	member := e.user("member@example.com", auth.RoleMember)
	_, body := member.get("/tools")
	body = html.UnescapeString(body)
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range registry.List() {
		card, ok := section(body, `id="tool-`+tool.Name+`"`, "</article>")
		if !ok {
			t.Fatalf("%s is not listed", tool.Name)
		}
		c := tool.Contract
		if !strings.Contains(card, `data-testid="tool-class-rationale"><strong>Why this class:</strong> `+c.ClassRationale+"</p>") {
			t.Errorf("%s does not say why it is %s", tool.Name, c.Authority)
		}
		level := "not stated"
		if c.SLA.P95Latency > 0 {
			level = fmt.Sprintf("95%% of calls within %s; %s available", c.SLA.P95Latency, c.SLA.Availability)
		}
		if !strings.Contains(card, "<dt>Undoing it</dt><dd>"+c.Reversibility+"</dd>") || !strings.Contains(card, "<dt>Service level</dt><dd>"+level+"</dd>") {
			t.Errorf("%s does not show its reversibility and service level", tool.Name)
		}
	}
	email, _ := section(body, `id="tool-email.send"`, "</article>")
	if !strings.Contains(email, "<dt>Personal data</dt><dd>to (redacted in the audit export") {
		t.Errorf("email.send does not name to as personal data")
	}
	put, _ := section(body, `id="tool-records.put"`, "</article>")
	if !strings.Contains(put, "<dt>Personal data</dt><dd>none declared</dd>") {
		t.Errorf("records.put claims personal data")
	}
}

// GET /api/v1/tools carries each contract's class_rationale,
// reversibility, pii_fields and sla (checked against openapi.yaml too);
// an upstream tool's come from how it was classified and the policy file.
func TestToolsAPI_ContractSaysWhyHowItIsUndoneAndWhatIsPersonal(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	e, _ := newEnvPolicy(t, fmt.Sprintf(`
upstreams:
  - name: files
    url: %s
    accept: [read_file, stamp, note, delete_file]
    tools:
      stamp:
        effect: read
        class_rationale: "It only reads the file's date; we read its source."
        pii_fields: [owner_email]
        sla: {p95_latency_ms: 500, availability: "99.9%%"}
      note: {effect: mutate, authority: write-idempotent}
      delete_file:
        reversibility: "Restore it from the nightly backup."
`, f.url))
	e.user("owner@example.com", auth.RoleMember)
	resp, out := e.api("GET", "/api/v1/tools", e.token("owner@example.com", auth.TokenAgent), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, out)
	}
	contracts := map[string]map[string]any{}
	for _, raw := range out["tools"].([]any) {
		tool := raw.(map[string]any)
		c := tool["contract"].(map[string]any)
		contracts[tool["name"].(string)] = c
		if r, _ := c["class_rationale"].(string); len(r) < 10 {
			t.Errorf("%s: class_rationale %q", tool["name"], r)
		}
		if r, _ := c["reversibility"].(string); r == "" {
			t.Errorf("%s: no reversibility", tool["name"])
		}
		if c["authority"] == "irreversible" && !strings.HasPrefix(c["reversibility"].(string), "None via tools") {
			t.Errorf("%s is irreversible: reversibility %q", tool["name"], c["reversibility"])
		}
	}
	strs := func(v any) []string {
		var out []string
		for _, s := range v.([]any) {
			out = append(out, s.(string))
		}
		return out
	}
	for name, want := range map[string]struct {
		rationale, reversibility string
		pii                      []string
		sla                      map[string]any
	}{
		"email.send": {"Each call sends another message: a retry without the same idempotency key mails the recipient twice.",
			"A delivered message cannot be recalled; a later message can only correct it.", []string{"to"}, map[string]any{}},
		"files.read_file": {"Declared read-only by its annotations (readOnlyHint: true).", "Nothing to undo: a read changes nothing.", nil, map[string]any{}},
		"files.stamp": {"The policy file says: It only reads the file's date; we read its source.", "Nothing to undo: a read changes nothing.",
			[]string{"owner_email"}, map[string]any{"p95_latency_ms": float64(500), "availability": "99.9%"}},
		"files.note": {"The policy file declares it (effect: mutate, authority: write-idempotent) without a reason (class_rationale).",
			"Another call with the earlier value overwrites it.", nil, map[string]any{}},
		"files.delete_file": {"Its annotations say it may destroy data (destructiveHint: true), so it is taken as irreversible.",
			"None via tools. Restore it from the nightly backup.", nil, map[string]any{}},
	} {
		c := contracts[name]
		if c == nil {
			t.Errorf("%s is not listed", name)
			continue
		}
		if c["class_rationale"] != want.rationale || c["reversibility"] != want.reversibility {
			t.Errorf("%s: rationale %q, reversibility %q", name, c["class_rationale"], c["reversibility"])
		}
		if got := strs(c["pii_fields"]); !slices.Equal(got, want.pii) {
			t.Errorf("%s: pii_fields %v, want %v", name, got, want.pii)
		}
		if got := c["sla"].(map[string]any); fmt.Sprint(got) != fmt.Sprint(want.sla) {
			t.Errorf("%s: sla %v, want %v", name, got, want.sla)
		}
	}
}
