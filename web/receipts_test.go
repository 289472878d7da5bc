package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
)

// recordReceipts writes n receipts in the env's workspace, as outcomes do.
func (e *env) recordReceipts(n int) []string {
	e.t.Helper()
	ids := make([]string, n)
	for i := range n {
		id, err := receipts.Record(context.Background(), db.New(e.pool), mustUUID(e.t, e.ws), receipts.Content{
			Kind: receipts.KindExecution, Outcome: "auto", ProposalID: uuid.NewString(), ActionClass: "records.put", Tool: "records.put",
			Actor:     receipts.Actor{Kind: "agent", UserID: uuid.NewString(), TokenID: uuid.NewString()},
			Arguments: json.RawMessage(fmt.Sprintf(`{"collection":"c","key":"k%d","value":{"n":%d,"small":1e-7,"big":1e21,"text":"ünïcødé ✓ <b>","pi":3.141592653589793}}`, i, i)),
			Rationale: "Keep the customer's record up to date.",
		}, time.Now())
		if err != nil {
			e.t.Fatal(err)
		}
		ids[i] = id.String()
	}
	return ids
}

// waitChained waits until the server's sequencer has chained the receipt:
// well within a second.
func (e *env) waitChained(token, id string) map[string]any {
	e.t.Helper()
	start := time.Now()
	for {
		resp, r := e.api("GET", "/api/v1/receipts/"+id, token, nil)
		if resp.StatusCode != http.StatusOK {
			e.t.Fatalf("GET receipt %s: %d %v", id, resp.StatusCode, r)
		}
		if r["status"] == "chained" {
			if d := time.Since(start); d > 3*time.Second {
				e.t.Errorf("the receipt took %v to be chained", d)
			}
			return r
		}
		if r["status"] != "pending" || r["seq"] != nil || r["hash"] != nil {
			e.t.Fatalf("an unchained receipt: %v", r)
		}
		if time.Since(start) > 10*time.Second {
			e.t.Fatalf("receipt %s still pending after 10s", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// verifyChain verifies the chain as a script does: GET
// /api/v1/receipts/verify starts a verification in the background (202
// and its status URL), polled until it ends. It returns the result.
func (e *env) verifyChain(token string) map[string]any {
	e.t.Helper()
	resp, run := e.api("GET", "/api/v1/receipts/verify", token, nil)
	if resp.StatusCode != http.StatusAccepted || run["status_url"] == nil || resp.Header.Get("Location") != run["status_url"] {
		e.t.Fatalf("verify: %d %v (Location %q)", resp.StatusCode, run, resp.Header.Get("Location"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for run["status"] != "done" {
		if run["status"] == "failed" || time.Now().After(deadline) {
			e.t.Fatalf("verification: %v", run)
		}
		time.Sleep(20 * time.Millisecond)
		if resp, run = e.api("GET", run["status_url"].(string), token, nil); resp.StatusCode != http.StatusOK {
			e.t.Fatalf("verification status: %d %v", resp.StatusCode, run)
		}
	}
	return run["result"].(map[string]any)
}

// raw calls the API and returns the body as is (checked against openapi.yaml).
func (e *env) raw(method, path, token string) (*http.Response, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body := []byte(readBody(e.t, resp))
	checkAgainstSpec(e.t, req, nil, resp, body)
	return resp, body
}

// export reads the whole chain, a page at a time.
func (e *env) export(token string, page int) []byte {
	e.t.Helper()
	var out bytes.Buffer
	after := 0.0
	for {
		resp, body := e.raw("GET", fmt.Sprintf("/api/v1/receipts?after_seq=%d&limit=%d", int(after), page), token)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
			e.t.Fatalf("export: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		out.Write(body)
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				e.t.Fatalf("export line: %v\n%s", err, sc.Bytes())
			}
			after = r["seq"].(float64)
			lines++
		}
		if lines < page {
			return out.Bytes()
		}
	}
}

func TestReceiptsAPI_VerifyCheckpointExportAndRedact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("admin@example.com", auth.RoleAdmin)
	e.user("member@example.com", auth.RoleMember)
	admin := e.token("admin@example.com", auth.TokenUser)
	agent := e.token("admin@example.com", auth.TokenAgent)
	member := e.token("member@example.com", auth.TokenUser)

	ids := e.recordReceipts(5)
	first := e.waitChained(admin, ids[0])
	if first["seq"] == nil || len(first["hash"].(string)) != 64 || first["content"] == nil {
		t.Fatalf("chained receipt: %v", first)
	}
	last := e.waitChained(admin, ids[4])

	if v := e.verifyChain(member); v["ok"] != true || v["checked"] != 5.0 || v["head_seq"] != 5.0 || v["head_hash"] != last["hash"] {
		t.Fatalf("verify: %v", v)
	}
	if resp, p := e.api("GET", "/api/v1/receipts/verify", agent, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent verified: %d %v", resp.StatusCode, p)
	}

	// The checkpoint verifies with the public key the server publishes.
	_, cp := e.api("GET", "/api/v1/receipts/checkpoint", member, nil)
	_, pk := e.api("GET", "/api/v1/receipts/public-key", agent, nil)
	pub, err := receipts.ParsePublicKey([]byte(pk["public_key_pem"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	var signed receipts.SignedCheckpoint
	b, _ := json.Marshal(cp)
	if err := json.Unmarshal(b, &signed); err != nil {
		t.Fatal(err)
	}
	if err := receipts.VerifyCheckpoint(pub, signed); err != nil || signed.Seq != 5 || signed.HeadHash != last["hash"] || signed.WorkspaceID != e.ws {
		t.Fatalf("checkpoint %+v: %v", signed, err)
	}

	// Export: approvers and admins only; every line verifies.
	if resp, _ := e.raw("GET", "/api/v1/receipts", member); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a member exported: %d", resp.StatusCode)
	}
	if resp, body := e.raw("GET", "/api/v1/receipts?limit=0", admin); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("limit 0: %d %s", resp.StatusCode, body)
	}
	lines := strings.Split(strings.TrimSpace(string(e.export(admin, 2))), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines exported", len(lines))
	}
	var rows []receipts.Row
	for _, l := range lines {
		rows = append(rows, rowFromExport(t, []byte(l)))
	}
	if res := receipts.Verify(func(yield func(receipts.Row) bool) {
		for _, r := range rows {
			if !yield(r) {
				return
			}
		}
	}); !res.OK || res.HeadSeq != 5 {
		t.Fatalf("the export does not verify: %+v", res)
	}

	// Redaction: admins' user tokens only.
	body := map[string]any{"redacted_for": "the customer asked to be forgotten"}
	for _, tok := range []string{member, agent} {
		if resp, p := e.api("POST", "/api/v1/receipts/"+ids[1]+"/redact", tok, body); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("redacted without being an admin's user token: %d %v", resp.StatusCode, p)
		}
	}
	resp, red := e.api("POST", "/api/v1/receipts/"+ids[1]+"/redact", admin, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("redact: %d %v", resp.StatusCode, red)
	}
	redacted := red["receipt"].(map[string]any)
	if redacted["content"] != nil || redacted["redacted_for"] != body["redacted_for"] || redacted["hash"] == nil {
		t.Fatalf("redacted receipt: %v", redacted)
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+ids[1]+"/redact", admin, body); resp.StatusCode != http.StatusConflict {
		t.Fatalf("second redaction: %d", resp.StatusCode)
	}
	if resp, _ := e.api("POST", "/api/v1/receipts/"+uuid.NewString()+"/redact", admin, body); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown receipt: %d", resp.StatusCode)
	}
	rr := e.waitChained(admin, red["redaction_receipt_id"].(string))
	change := rr["content"].(map[string]any)["change"].(map[string]any)
	if rr["kind"] != "redaction" || rr["seq"] != 6.0 || change["receipt_id"] != ids[1] || change["redacted_for"] != body["redacted_for"] {
		t.Fatalf("redaction receipt: %v", rr)
	}
	if v := e.verifyChain(admin); v["ok"] != true || v["head_seq"] != 6.0 {
		t.Fatalf("verify after the redaction: %v", v)
	}
	var audited int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events WHERE action = 'receipt.redacted' AND subject_id = $1", ids[1]).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("audit rows: %d %v", audited, err)
	}
}

// rowFromExport reads one export line as the verifier's row.
func rowFromExport(t *testing.T, line []byte) receipts.Row {
	t.Helper()
	var l struct {
		ReceiptID   string          `json:"receipt_id"`
		Seq         int64           `json:"seq"`
		PrevHash    hexBytes        `json:"prev_hash"`
		Hash        hexBytes        `json:"hash"`
		ContentHash hexBytes        `json:"content_hash"`
		Metadata    json.RawMessage `json:"metadata"`
		Content     json.RawMessage `json:"content"`
		RedactedFor *string         `json:"redacted_for"`
		RedactedAt  *string         `json:"redacted_at"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatal(err)
	}
	r := receipts.Row{ReceiptID: l.ReceiptID, Seq: l.Seq, PrevHash: l.PrevHash, Hash: l.Hash, ContentHash: l.ContentHash, Metadata: l.Metadata,
		Content: l.Content, Redacted: l.RedactedAt != nil}
	if l.RedactedFor != nil {
		r.RedactedFor = *l.RedactedFor
	}
	return r
}

type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	_, err := fmt.Sscanf(s, "%x", (*[]byte)(h))
	return err
}

func TestReceiptsPage_ShowsTheChainAndVerifiesNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	browser := e.user("admin@example.com", auth.RoleAdmin)
	member := e.user("member@example.com", auth.RoleMember)
	admin := e.token("admin@example.com", auth.TokenUser)
	ids := e.recordReceipts(3)
	r := e.waitChained(admin, ids[2])

	resp, page := browser.get("/admin/receipts")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-testid="head-seq">3<`) || !strings.Contains(page, r["hash"].(string)) ||
		!strings.Contains(page, `&#34;signature&#34;`) || strings.Count(page, "data-receipt=") != 3 {
		t.Fatalf("page: %d\n%s", resp.StatusCode, page)
	}
	// Contents come when a row is opened, not with the page.
	if strings.Contains(page, "&#34;outcome&#34;") || strings.Count(page, `/content" hx-trigger="toggle once"`) != 3 {
		t.Fatalf("the page carries the receipts' contents, or cannot fetch them:\n%s", page)
	}
	if resp, frag := browser.get("/admin/receipts/" + ids[2] + "/content"); resp.StatusCode != http.StatusOK ||
		!strings.Contains(frag, "&#34;outcome&#34;: &#34;") || strings.Contains(frag, "<html") {
		t.Fatalf("a receipt's content: %d\n%s", resp.StatusCode, frag)
	}
	if resp, _ := member.get("/admin/receipts/" + ids[2] + "/content"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a member read a receipt's content: %d", resp.StatusCode)
	}
	if resp, _ := browser.get("/admin/receipts/not-a-receipt/content"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown receipt's content: %d", resp.StatusCode)
	}
	// The proposal link lists that proposal's receipts.
	proposal := r["metadata"].(map[string]any)["proposal_id"].(string)
	if _, page := browser.get("/admin/receipts?proposal=" + proposal); strings.Count(page, "data-receipt=") != 1 || !strings.Contains(page, ids[2]) {
		t.Fatalf("one proposal's receipts:\n%s", page)
	}
	// "Verify now", with htmx and without.
	req, _ := http.NewRequest("GET", e.url+"/admin/receipts/verify", nil)
	req.Header.Set("HX-Request", "true")
	hx, err := browser.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if frag := readBody(t, hx); hx.StatusCode != http.StatusOK || !strings.Contains(frag, "verification-ok") || strings.Contains(frag, "<html") {
		t.Fatalf("verify fragment: %d\n%s", hx.StatusCode, frag)
	}
	if _, page := browser.get("/admin/receipts?verify=1"); !strings.Contains(page, "verification-ok") {
		t.Fatalf("verify without htmx:\n%s", page)
	}
	// A broken chain says where.
	if _, err := e.pool.Exec(context.Background(), "UPDATE receipts SET content = content || '{\"rationale\":\"changed\"}' WHERE id IN (SELECT receipt_id FROM receipt_links WHERE seq = 2)"); err != nil {
		t.Fatal(err)
	}
	if _, page := browser.get("/admin/receipts?verify=1"); !strings.Contains(page, "verification-broken") || !strings.Contains(page, "broken at seq 2") {
		t.Fatalf("broken chain:\n%s", page)
	}
	if resp, _ := member.get("/admin/receipts"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a member reached the receipts page: %d", resp.StatusCode)
	}
}

// TestVerifyScript_VerifiesAnExportAndFailsOnATamperedOne runs the
// independent Python verifier (docs/verify_receipts.py) on a real export.
func TestVerifyScript_VerifiesAnExportAndFailsOnATamperedOne(t *testing.T) {
	t.Parallel()
	python := requirePython(t)
	e := newEnv(t)
	e.user("admin@example.com", auth.RoleAdmin)
	admin := e.token("admin@example.com", auth.TokenUser)
	ids := e.recordReceipts(12)
	e.waitChained(admin, ids[len(ids)-1])
	// An auditor saves a checkpoint and the public key.
	dir := t.TempDir()
	_, cpBody := e.raw("GET", "/api/v1/receipts/checkpoint", admin)
	_, pkBody := e.raw("GET", "/api/v1/receipts/public-key", admin)
	cpFile, pkFile, badFile := filepath.Join(dir, "cp.json"), filepath.Join(dir, "pk.json"), filepath.Join(dir, "bad.json")
	os.WriteFile(cpFile, cpBody, 0o600)
	os.WriteFile(pkFile, pkBody, 0o600)
	var cp map[string]any
	json.Unmarshal(cpBody, &cp)
	forged := bytes.Replace(cpBody, []byte(`"seq":12`), []byte(`"seq":11`), 1)
	os.WriteFile(badFile, forged, 0o600)
	if resp, red := e.api("POST", "/api/v1/receipts/"+ids[3]+"/redact", admin, map[string]any{"redacted_for": "personal data"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("redact: %d %v", resp.StatusCode, red)
	} else {
		e.waitChained(admin, red["redaction_receipt_id"].(string))
	}
	export := e.export(admin, 5)

	run := func(input []byte, args ...string) (string, int) { return runScript(t, python, input, args...) }
	if out, code := run(export); code != 0 || !strings.HasPrefix(out, "ok: 13 receipts, head seq 13") {
		t.Fatalf("the script on a good export: exit %d\n%s", code, out)
	}

	// The chain extends the checkpoint, whose signature verifies; a
	// checkpoint changed after signing does not.
	if out, code := run(export, "--checkpoint", cpFile, "--public-key", pkFile); code != 0 || !strings.HasPrefix(out, "ok: 13 receipts") {
		t.Fatalf("the script with the checkpoint: exit %d\n%s", code, out)
	}
	if out, code := run(export, "--checkpoint", badFile, "--public-key", pkFile); code != 1 || !strings.Contains(out, "signature does not verify") {
		t.Fatalf("the script with a forged checkpoint: exit %d\n%s", code, out)
	}
	if cp["seq"] != 12.0 {
		t.Fatalf("checkpoint %v", cp)
	}
	lines := strings.SplitAfter(string(export), "\n")
	tampered := func(name string, change func([]string) []string, badSeq int) {
		t.Helper()
		changed := change(append([]string(nil), lines...))
		out, code := run([]byte(strings.Join(changed, "")))
		if code == 0 || !strings.Contains(out, fmt.Sprintf("first bad seq %d", badSeq)) {
			t.Errorf("%s: exit %d\n%s", name, code, out)
		}
	}
	tampered("content changed", func(l []string) []string {
		l[6] = strings.Replace(l[6], `"key":"k6"`, `"key":"k66"`, 1)
		return l
	}, 7)
	tampered("a number changed", func(l []string) []string {
		l[8] = strings.Replace(l[8], `"n":8`, `"n":8.5`, 1)
		return l
	}, 9)
	tampered("a line deleted", func(l []string) []string { return append(l[:4], l[5:]...) }, 5)
	tampered("two lines swapped", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2)
	tampered("a hash changed", func(l []string) []string {
		var r map[string]any
		json.Unmarshal([]byte(l[10]), &r)
		l[10] = strings.Replace(l[10], r["hash"].(string), strings.Repeat("ab", 32), 1)
		return l
	}, 11)
	tampered("a redaction undone with other content", func(l []string) []string {
		l[3] = strings.Replace(l[3], `"content":null`, `"content":{"kind":"execution"}`, 1)
		return l
	}, 4)

	// The same numbers in the forms JavaScript and Python print differently
	// canonicalise alike: reformatting a line's JSON changes nothing.
	var r map[string]any
	json.Unmarshal([]byte(lines[0]), &r)
	pretty, _ := json.MarshalIndent(r, "", "  ")
	reformatted := append([]string{strings.ReplaceAll(string(pretty), "\n", " ") + "\n"}, lines[1:]...)
	if out, code := run([]byte(strings.Join(reformatted, ""))); code != 0 {
		t.Fatalf("a reformatted export: exit %d\n%s", code, out)
	}
}

// requirePython is python3's path, or skips the test (fails it when
// GATEHOUSE_TEST_REQUIRE_PYTHON is set, as in CI).
func requirePython(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("GATEHOUSE_TEST_REQUIRE_PYTHON") != "" {
			t.Fatal("python3 is not on PATH, and GATEHOUSE_TEST_REQUIRE_PYTHON is set (make ensure-python installs it)")
		}
		t.Skip("python3 is not on PATH: the independent verifier (docs/verify_receipts.py) is not tested; `make ensure-python` installs it")
	}
	return python
}

// runScript runs the independent verifier (docs/verify_receipts.py) on an
// export and returns what it printed and its exit code.
func runScript(t *testing.T, python string, input []byte, args ...string) (string, int) {
	t.Helper()
	script, _ := filepath.Abs("../docs/verify_receipts.py")
	cmd := exec.Command(python, append([]string{script}, args...)...)
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}
