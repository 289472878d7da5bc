package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/web"
)

// The Trust Graduation Protocol's wire format (docs/tgp.md): its JSON
// Schemas are served at their $id, and the API's real answers (decisions,
// packets, receipts, evidence, posteriors) are valid against them.

// httpSchemaLoader loads schemas from the running server: a schema is
// resolved at its $id URL, as the protocol asks (§6).
type httpSchemaLoader struct{ t *testing.T }

func (l httpSchemaLoader) Load(url string) (any, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return jsonschema.UnmarshalJSON(resp.Body)
}

// tgpSchemas compiles every published schema from the server, asserting
// formats (date-time, uuid, duration) as well.
func tgpSchemas(t *testing.T, base string) map[string]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{"http": httpSchemaLoader{t}, "https": httpSchemaLoader{t}})
	out := map[string]*jsonschema.Schema{}
	for _, name := range web.SchemaNames {
		sch, err := c.Compile(base + "/schemas/" + name)
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		out[strings.TrimSuffix(name, ".schema.json")] = sch
	}
	return out
}

// mustValidate fails the test when v (a decoded JSON value, or JSON bytes)
// is not valid against sch.
func mustValidate(t *testing.T, sch *jsonschema.Schema, what string, v any) {
	t.Helper()
	raw, ok := v.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s is not valid against %s: %v\n%s", what, sch.Location, err, raw)
	}
}

func TestTGP_SchemasAreServedAtTheirID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range web.SchemaNames {
		resp, err := http.Get(e.url + "/schemas/" + name) // no token: public
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(readBody(t, resp))
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/schema+json" ||
			resp.Header.Get("Cache-Control") != "public, max-age=3600" || resp.Header.Get("ETag") == "" {
			t.Fatalf("%s: %d %v", name, resp.StatusCode, resp.Header)
		}
		if doc["$id"] != e.url+"/schemas/"+name || doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $id %v, $schema %v", name, doc["$id"], doc["$schema"])
		}
		// Cached: the ETag answers 304.
		req, _ := http.NewRequest("GET", e.url+"/schemas/"+name, nil)
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		again, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		again.Body.Close()
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d", name, again.StatusCode)
		}
	}
	for _, path := range []string{"/schemas/proposal.schema.json", "/schemas/..%2fopenapi.yaml", "/schemas/"} {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	// Every schema compiles as draft 2020-12, its $refs resolved from
	// the server.
	tgpSchemas(t, e.url)
}

func TestTGP_SchemaIDIsThePublicURLWhenSet(t *testing.T) {
	t.Parallel()
	e := newEnvConfig(t, dbtest.MustPool(t), mustBuiltin(t), web.Config{IssuerURL: "https://gatehouse.example.com/"})
	resp, err := http.Get(e.url + "/schemas/receipt.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal([]byte(readBody(t, resp)), &doc)
	if doc["$id"] != "https://gatehouse.example.com/schemas/receipt.schema.json" {
		t.Errorf("$id %v", doc["$id"])
	}
}

func TestTGP_SpecExampleIsAValidDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	example, err := os.ReadFile("testdata/tgp_spec_decision.json")
	if err != nil {
		t.Fatal(err)
	}
	mustValidate(t, tgpSchemas(t, e.url)["decision"], "the protocol's own example", example)
}

func TestTGP_DecisionsSpeakTheProtocol(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent := e.token("owner@example.com", auth.TokenAgent)
	schemas := tgpSchemas(t, e.url)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	id := conv["id"].(string)
	put := map[string]any{"collection": "c", "key": "k", "value": map[string]any{"n": 1}}

	// The dry run: Gatehouse's fields as before, and the protocol's shape.
	resp, d := e.api("POST", "/api/v1/decisions", agent, map[string]any{"conversation_id": id, "tool": "records.put", "arguments": put})
	tgp, _ := d["tgp"].(map[string]any)
	if resp.StatusCode != http.StatusOK || d["state"] != "review_required" || d["layers"] == nil || tgp == nil ||
		tgp["status"] != "review_required" || tgp["action_class"] != d["action_class"] {
		t.Fatalf("dry run: %d %v", resp.StatusCode, d)
	}
	if cs, ok := tgp["constraints"].(map[string]any); !ok || len(cs) != 0 {
		t.Errorf("constraints %v, want {}", tgp["constraints"])
	}
	mustValidate(t, schemas["decision"], "the dry run's tgp", tgp)

	// A call under a constraint: keyed by its kind.
	resp, d = e.api("POST", "/api/v1/decisions", agent, map[string]any{"conversation_id": id, "tool": "webhook.post",
		"arguments": map[string]any{"url": "https://hooks.example.com/in", "payload": map[string]any{}}})
	tgp, _ = d["tgp"].(map[string]any)
	cs, _ := tgp["constraints"].(map[string]any)
	if resp.StatusCode != http.StatusOK || cs["domain_allowlist"] == nil || tgp["status"] != d["state"] {
		t.Fatalf("webhook dry run: %d %v", resp.StatusCode, d)
	}
	mustValidate(t, schemas["decision"], "the webhook dry run's tgp", tgp)

	// A proposal's decision, and its decision at the moment of effect.
	resp, p := e.api("POST", "/api/v1/conversations/"+id+"/tool-calls", agent, map[string]any{"tool": "records.put", "arguments": put,
		"rationale": "keep the record up to date"})
	dec, _ := p["decision"].(map[string]any)
	if resp.StatusCode != http.StatusAccepted || dec == nil || dec["tgp"] == nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	mustValidate(t, schemas["decision"], "a proposal's decision.tgp", dec["tgp"])
	user := e.token("owner@example.com", auth.TokenUser)
	resp, p = e.api("POST", "/api/v1/proposals/"+p["proposal_id"].(string)+"/apply", user, nil)
	eff, _ := p["effect_decision"].(map[string]any)
	if resp.StatusCode != http.StatusOK || p["status"] != "applied" || eff == nil {
		t.Fatalf("apply: %d %v", resp.StatusCode, p)
	}
	if tgp := eff["tgp"].(map[string]any); tgp["status"] != eff["state"] {
		t.Errorf("effect decision %v", eff)
	}
	mustValidate(t, schemas["decision"], "a proposal's effect_decision.tgp", eff["tgp"])
}

func TestTGP_PacketsReceiptsEvidenceAndPosteriorsAreValid(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, dbtest.MustPool(t), sendRegistry(t))
	e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	owner := e.token("owner@example.com", auth.TokenUser)
	approver := e.token("boss@example.com", auth.TokenUser)
	schemas := tgpSchemas(t, e.url)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})

	// A high-risk call waits in an approval packet.
	resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "t.send",
		"arguments": map[string]any{"to": "ana@example.com"}, "rationale": "the client asked for it", "idempotency_key": "tgp-send-0000000001"})
	if resp.StatusCode != http.StatusAccepted || p["approval_id"] == nil {
		t.Fatalf("propose: %d %v", resp.StatusCode, p)
	}
	mustValidate(t, schemas["decision"], "a deferred call's decision.tgp", p["decision"].(map[string]any)["tgp"])
	packet := "/admin/approvals/" + p["approval_id"].(string)
	status, a := adminJSON(t, e, "GET", packet, approver, nil)
	if status != http.StatusOK {
		t.Fatalf("packet: %d %v", status, a)
	}
	mustValidate(t, schemas["approval-packet"], "the pending packet", a)

	// Approved with a constraint: the packet, and the call's receipt.
	status, out := adminJSON(t, e, "POST", packet+"/approve", approver, map[string]any{"constraints": []any{
		map[string]any{"kind": "recipient_allowlist", "values": []string{"example.com"}}}})
	if status != http.StatusOK || out["proposal"].(map[string]any)["status"] != "applied" {
		t.Fatalf("approve: %d %v", status, out)
	}
	mustValidate(t, schemas["approval-packet"], "the approved packet", out["approval"])

	_, chain := e.raw("GET", "/api/v1/receipts?after_seq=0&limit=100", approver)
	var receiptID string
	for line := range strings.Lines(strings.TrimSpace(string(chain))) {
		mustValidate(t, schemas["receipt"], "an export line", []byte(line))
		var r map[string]any
		json.Unmarshal([]byte(line), &r)
		receiptID, _ = r["receipt_id"].(string)
	}
	if receiptID == "" {
		// Not chained yet: read the call's receipt while it waits.
		rows, err := e.pool.Query(t.Context(), "SELECT id::text FROM receipts ORDER BY created_at DESC LIMIT 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			rows.Scan(&receiptID)
		}
		rows.Close()
	}
	resp, r := e.api("GET", "/api/v1/receipts/"+receiptID, approver, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("receipt %s: %d %v", receiptID, resp.StatusCode, r)
	}
	mustValidate(t, schemas["receipt"], "a receipt", r)
	mustValidate(t, schemas["receipt"], "a chained receipt", e.waitChained(approver, receiptID))

	// Evidence, from a person and from an agent, and the posterior.
	resp, ev := e.api("POST", "/api/v1/evidence", owner, map[string]any{"action_class": "proposal.submit", "label": "minor_edit", "note": "fine"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("evidence: %d %v", resp.StatusCode, ev)
	}
	mustValidate(t, schemas["evidence"], "a principal's evidence", ev)
	resp, ev = e.api("POST", "/api/v1/evidence", agent, map[string]any{"action_class": "proposal.submit", "label": "rejected",
		"proposal_id": p["proposal_id"]})
	if resp.StatusCode != http.StatusCreated || ev["provenance"] != "model_inferred" {
		t.Fatalf("agent evidence: %d %v", resp.StatusCode, ev)
	}
	mustValidate(t, schemas["evidence"], "an agent's evidence", ev)
	for _, class := range []string{"proposal.submit", "email.send.external"} {
		resp, post := e.api("GET", "/api/v1/action-classes/"+class+"/posterior", owner, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("posterior %s: %d %v", class, resp.StatusCode, post)
		}
		mustValidate(t, schemas["posterior"], class+"'s posterior", post)
	}

	// The schemas are not vacuous: answers with a field broken fail them.
	for _, tc := range []struct {
		schema string
		doc    map[string]any
		field  string
		value  any
	}{
		{"approval-packet", a, "expires_at", "tomorrow"},
		{"approval-packet", a, "approval_id", 7},
		{"receipt", r, "content_hash", "not a hash"},
		{"evidence", ev, "provenance", "receipt-grade"},
		{"posterior", map[string]any{"action_class": "proposal.submit"}, "mean", 1.5},
		{"decision", map[string]any{"status": "allowed"}, "constraints", map[string]any{"rate_limit": map[string]any{"count": 5, "window": "1h"}}},
		{"decision", map[string]any{"status": "allowed"}, "constraints", map[string]any{"speed_limit": true}},
		{"decision", map[string]any{}, "status", "approved"},
	} {
		broken := map[string]any{}
		for k, v := range tc.doc {
			broken[k] = v
		}
		broken[tc.field] = tc.value
		b, _ := json.Marshal(broken)
		inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err := schemas[tc.schema].Validate(inst); err == nil {
			t.Errorf("%s accepts %s = %v", tc.schema, tc.field, tc.value)
		}
	}
}

// The protocol's own example body, posted verbatim, approves a packet: the
// approver's decision that the call may run inside its constraints.
func TestTGP_SpecExampleApprovesAPacket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	e.user("boss@example.com", auth.RoleApprover)
	agent := e.token("owner@example.com", auth.TokenAgent)
	approver := e.token("boss@example.com", auth.TokenUser)
	if _, err := e.pool.Exec(t.Context(), "UPDATE workspaces SET internal_domains = '{company.com}'"); err != nil {
		t.Fatal(err)
	}
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	propose := func(key string) string {
		resp, p := e.api("POST", "/api/v1/conversations/"+conv["id"].(string)+"/tool-calls", agent, map[string]any{"tool": "email.send",
			"arguments": map[string]any{"to": "ana@company.com", "subject": "Renewal", "body": "Hello"}, "rationale": "remind ana of the renewal",
			"idempotency_key": key})
		if resp.StatusCode != http.StatusAccepted || p["action_class"] != "email.send.internal" || p["approval_id"] == nil {
			t.Fatalf("propose: %d %v", resp.StatusCode, p)
		}
		return "/admin/approvals/" + p["approval_id"].(string)
	}
	post := func(path string, body []byte) (int, map[string]any) {
		req, _ := http.NewRequest("POST", e.url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+approver)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		respBody := []byte(readBody(t, resp))
		checkAgainstSpec(t, req, body, resp, respBody)
		var out map[string]any
		json.Unmarshal(respBody, &out)
		return resp.StatusCode, out
	}

	// Bad input in the protocol's shape: 422 naming the field, nothing done.
	packet := propose("tgp-mail-0000000001")
	for _, tc := range []struct{ body, field string }{
		{`{"status": "blocked", "constraints": {}}`, "status"},
		{`{"status": "allowed", "constraints": {"internal_only": true}}`, "status"},
		{`{"status": "allowed_with_constraints", "action_class": "payment.initiate"}`, "action_class"},
		{`{"constraints": {"speed_limit": 3}}`, "constraints.speed_limit"},
		{`{"constraints": {"rate_limit": {"count": 5, "window": "an hour"}}}`, "constraints.rate_limit.window"},
		{`{"constraints": {"expires_at": "13 June"}}`, "constraints.expires_at"},
		{`{"status": "allowed_with_constraints", "constraints": {}, "note": "x"}`, "note"},
	} {
		status, p := post(packet+"/approve", []byte(tc.body))
		errs, _ := p["errors"].([]any)
		if status != http.StatusUnprocessableEntity || len(errs) == 0 || errs[0].(map[string]any)["field"] != tc.field {
			t.Errorf("%s: %d %v, want 422 naming %s", tc.body, status, p, tc.field)
		}
	}
	if status, a := adminJSON(t, e, "GET", packet, approver, nil); status != http.StatusOK || a["status"] != "pending" {
		t.Fatalf("after bad input the packet is %v", a)
	}

	// The example itself: approved with its three constraints, which are
	// checked when the call runs (its expires_at, June 2026, has passed
	// by the time this test runs: the call fails closed, naming it).
	example, err := os.ReadFile("testdata/tgp_spec_decision.json")
	if err != nil {
		t.Fatal(err)
	}
	status, out := post(packet+"/approve", example)
	if status != http.StatusOK {
		t.Fatalf("approve with the protocol's example: %d %v", status, out)
	}
	a, pr := out["approval"].(map[string]any), out["proposal"].(map[string]any)
	var want any
	json.Unmarshal([]byte(`[{"kind": "rate_limit", "limit": 5, "window": 3600000000000}, {"kind": "domain_allowlist", "values": ["company.com"]},
		{"kind": "expires_at", "at": "2026-06-13T18:00:00Z"}]`), &want)
	if a["status"] != "approved" || !reflect.DeepEqual(a["constraints"], want) {
		t.Errorf("approval %v\nconstraints %v\nwant        %v", a, a["constraints"], want)
	}
	if pr["status"] != "failed" || !strings.Contains(fmt.Sprint(pr["error"]), "expires_at") {
		t.Errorf("the call ran past its expires_at: %v", pr)
	}
	mustValidate(t, tgpSchemas(t, e.url)["approval-packet"], "the packet approved in the protocol's shape", a)
}

func mustBuiltin(t *testing.T) *tools.Registry {
	t.Helper()
	r, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
