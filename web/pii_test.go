package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// A read that reads personal data (its tool's pii_fields) says which on
// its audit row: the names, never the values.
func TestPIIRead_ARecordsReadSaysWhatPersonalDataItRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.user("owner@example.com", auth.RoleMember)
	agent, user := e.token("owner@example.com", auth.TokenAgent), e.token("owner@example.com", auth.TokenUser)
	_, conv := e.api("POST", "/api/v1/conversations", agent, map[string]any{})
	calls := "/api/v1/conversations/" + conv["id"].(string) + "/tool-calls"
	e.api("PATCH", "/api/v1/conversations/"+conv["id"].(string), user, map[string]any{"permission_mode": "auto"})
	if resp, p := e.api("POST", calls, agent, map[string]any{"tool": "records.put", "rationale": "keep the client's contact",
		"arguments": map[string]any{"collection": "clients", "key": "ana", "value": map[string]any{"email": "ana@example.com", "plan": "pro"}}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("put: %d %v", resp.StatusCode, p)
	}
	get := func(key string) string {
		resp, p := e.api("POST", calls, agent, map[string]any{"tool": "records.get", "rationale": "look the client up before writing",
			"arguments": map[string]any{"collection": "clients", "key": key}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("get: %d %v", resp.StatusCode, p)
		}
		var read string
		e.pool.QueryRow(t.Context(), `SELECT coalesce(data->>'pii_read', '') FROM audit_events WHERE action IN ('proposal.applied', 'proposal.failed') AND subject_id = $1`,
			p["proposal_id"]).Scan(&read)
		return read
	}
	if read := get("ana"); read != `["email"]` {
		t.Fatalf("pii_read of a record with an email: %q", read)
	}
	if read := get("nobody"); read != "" {
		t.Fatalf("pii_read of a read that found nothing: %q", read)
	}
	var rows string
	e.pool.QueryRow(t.Context(), `SELECT string_agg(data::text, ' ') FROM audit_events WHERE data ? 'pii_read'`).Scan(&rows)
	if strings.Contains(rows, "ana@example.com") {
		t.Fatalf("the audit row carries the value: %s", rows)
	}
}
