package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// nestedJSON is a JSON object nested depth deep: {"a":{"a":…{}…}}.
func nestedJSON(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// hostileValues are argument values every path must refuse with a field
// error: what strictjson refuses in a body, and what canonicalisation or
// PostgreSQL would fail on later.
var hostileValues = map[string]string{
	"nested 40 deep":           nestedJSON(40),
	"nested 1,200 deep":        nestedJSON(1200),
	"nested 5,000 deep":        nestedJSON(5000),
	"a NUL":                    `{"a":"x\u0000"}`,
	"a lone surrogate":         `{"a":"\ud800"}`,
	"a duplicate key":          `{"a":1,"a":2}`,
	"a number no double holds": `{"a":1e400}`,
}

// storedRows counts what a call can leave behind.
func (e *env) storedRows() string {
	e.t.Helper()
	var proposals, receipts, records, audit, messages int
	if err := e.pool.QueryRow(e.t.Context(), `SELECT (SELECT count(*) FROM proposals), (SELECT count(*) FROM receipts),
		(SELECT count(*) FROM records), (SELECT count(*) FROM audit_events), (SELECT count(*) FROM transcript_lines WHERE conversation_id IS NOT NULL)`).
		Scan(&proposals, &receipts, &records, &audit, &messages); err != nil {
		e.t.Fatal(err)
	}
	return fmt.Sprintf("proposals %d, receipts %d, records %d, audit rows %d, transcript lines %d", proposals, receipts, records, audit, messages)
}

// TestHostileArguments_EveryPathRefusesThemAndTheChainKeepsMoving stores
// a hostile value through every path that reaches a receipt: the API, the
// card's Edit & approve (the whole document and the generated inputs), a
// notebook's cell form without an idempotency key, and MCP. Each answers
// a 4xx (or a tool error) naming the argument, stores nothing, and the
// receipt chain keeps moving: a good call after them is chained and the
// chain verifies with nothing waiting.
func TestHostileArguments_EveryPathRefusesThemAndTheChainKeepsMoving(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	user := e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{"title": "Clients"})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	resp, put := e.api("POST", calls, agent, map[string]any{"tool": "records.put",
		"arguments": map[string]any{"collection": "clients", "key": "acme", "value": map[string]any{"tier": "gold"}}, "rationale": "the user said Acme is gold"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("put: %d %v", resp.StatusCode, put)
	}
	putID := put["proposal_id"].(string)
	notebook := newNotebook(t, owner)
	session := e.mustMCP(agent, "hostile", nil)
	before := e.storedRows()

	for name, v := range hostileValues {
		t.Run(name, func(t *testing.T) {
			body := `{"tool":"records.put","arguments":{"collection":"c","key":"k","value":` + v + `},"rationale":"keep the record current"}`
			if resp, p := e.api("POST", calls, agent, body); resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusBadRequest {
				t.Errorf("API: %d %v", resp.StatusCode, p)
			}
			resp, frag := owner.postForm("/proposals/"+putID+"/apply", url.Values{"arguments": {`{"collection":"clients","key":"acme","value":` + v + `}`}})
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "arguments.value") || !strings.Contains(frag, `data-testid="card-error"`) {
				t.Errorf("Edit & approve, the document: %d\n%.2000s", resp.StatusCode, frag)
			}
			resp, frag = owner.postForm("/proposals/"+putID+"/apply", url.Values{"arg.collection": {"clients"}, "arg.key": {"acme"}, "arg.value": {v}})
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "must be acceptable JSON (object)") {
				t.Errorf("Edit & approve, the inputs: %d\n%.2000s", resp.StatusCode, frag)
			}
			resp, frag = owner.postForm(notebook+"/cells", url.Values{"tool": {"records.put"}, "arg.collection": {"c"}, "arg.key": {"k"},
				"arg.value": {v}, "rationale": {"keep the record current"}})
			if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(frag, "must be acceptable JSON (object)") {
				t.Errorf("cell form: %d\n%.2000s", resp.StatusCode, frag)
			}
			res, err := session.CallTool(t.Context(), &sdk.CallToolParams{Name: "records.put",
				Arguments: json.RawMessage(`{"collection":"c","key":"k","value":` + v + `,"rationale":"keep the record current"}`)})
			if err == nil && !res.IsError {
				t.Errorf("MCP ran the call: %+v", res)
			}
		})
	}
	if after := e.storedRows(); after != before {
		t.Fatalf("hostile calls stored something:\nbefore %s\nafter  %s", before, after)
	}
	if _, p := e.api("GET", "/api/v1/proposals/"+putID, agent, nil); p["status"] != "pending" {
		t.Fatalf("the card is %v after refused edits, want pending", p["status"])
	}

	// The chain keeps moving: the good edit applies and is chained.
	resp, frag := owner.postForm("/proposals/"+putID+"/apply", url.Values{"arg.collection": {"clients"}, "arg.key": {"acme"}, "arg.value": {`{"tier": "silver"}`}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(frag, `data-status="applied"`) {
		t.Fatalf("a good edit: %d\n%s", resp.StatusCode, frag)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := e.verifyChain(user)
		if v["ok"] != true {
			t.Fatalf("verify: %v", v)
		}
		if v["pending"] == 0.0 && v["checked"].(float64) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipts still wait to be chained: %v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestVerifyScript_CountsAReceiptChainedAsText: a receipt an old server
// stored with content RFC 8785 cannot canonicalise is chained as text; the
// independent verifier accepts the export and says how many there are,
// and the admin page shows them after "Verify now".
func TestVerifyScript_CountsAReceiptChainedAsText(t *testing.T) {
	t.Parallel()
	python := requirePython(t)
	e := newEnv(t)
	admin := e.user("admin@example.com", auth.RoleAdmin)
	token := e.token("admin@example.com", auth.TokenUser)
	ids := e.recordReceipts(2)
	var old string
	if err := e.pool.QueryRow(t.Context(), `INSERT INTO receipts (workspace_id, kind, content, metadata)
		VALUES ($1::uuid, 'execution', $2::jsonb, jsonb_build_object('kind', 'execution', 'workspace_id', $3::text)) RETURNING id::text`,
		e.ws, `{"kind":"execution","arguments":`+nestedJSON(1100)+`}`, e.ws).Scan(&old); err != nil {
		t.Fatal(err)
	}
	e.waitChained(token, old)
	e.waitChained(token, ids[1])
	out, code := runScript(t, python, e.export(token, 10))
	if code != 0 || !strings.Contains(out, "\nok: 3 receipts") || !strings.HasPrefix(out, "note: 1 receipts (first seq 3)") {
		t.Fatalf("the script: exit %d\n%s", code, out)
	}
	if _, page := admin.get("/admin/receipts?verify=1"); !strings.Contains(page, `data-testid="verification-ok"`) || !strings.Contains(page, `data-testid="content-errors"`) {
		t.Fatalf("the page does not show the receipt kept as text:\n%s", page)
	}
}
