package telemetry

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/db"
)

// The audit export never carries the value of a tool's personal-data
// field in the arguments an audit row holds: an edited email's recipient
// is "[redacted]" in the JSON lines (and the log record, built from the
// same record), while its subject and the row's other data stay.
func TestExportAudit_RedactsPersonalDataInArguments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tel, err := Setup(context.Background(), Config{Getenv: func(string) string { return "" }, AuditJSONL: path})
	if err != nil {
		t.Fatal(err)
	}
	rows := []db.ListAuditSpanRow{
		{ID: 1, Action: "proposal.refused_at_effect", Data: json.RawMessage(`{"tool": "email.send", "path": "owner",
			"arguments": {"to": "ana@example.com", "subject": "Renewal", "body": "Hi"}}`)},
		// An edit's row does not name its tool: every tool's fields are
		// redacted.
		{ID: 2, Action: "proposal.edited", Data: json.RawMessage(`{"before": {"to": "ana@example.com"}, "after": {"payee": "Ana Diaz", "amount": 5}}`)},
		{ID: 3, Action: "proposal.applied", Data: json.RawMessage(`{"tool": "email.send", "path": "auto"}`)},
	}
	for _, r := range rows {
		r.WorkspaceID, r.CreatedAt, r.ActorKind, r.SubjectType, r.SubjectID = uuid.New(), time.Now(), "user", "proposal", uuid.NewString()
		tel.exportAudit(context.Background(), r)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	if strings.Contains(out, "ana@example.com") || strings.Contains(out, "Ana Diaz") {
		t.Fatalf("the export carries personal data:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	var first struct {
		Data struct {
			Tool      string            `json:"tool"`
			Arguments map[string]string `json:"arguments"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if a := first.Data.Arguments; a["to"] != "[redacted]" || a["subject"] != "Renewal" || first.Data.Tool != "email.send" {
		t.Errorf("arguments exported as %v", first.Data)
	}
	if !strings.Contains(lines[1], `"amount":5`) || !strings.Contains(lines[2], `"path":"auto"`) {
		t.Errorf("what is not personal data changed:\n%s", out)
	}
}

// RedactPIIWith has the registry's fields (an upstream tool's too) used.
func TestRedactAudit_UsesTheToolsFields(t *testing.T) {
	pii := func(tool string) []string {
		if tool == "crm.find" {
			return []string{"email"}
		}
		return []string{"to"}
	}
	got := string(RedactAudit(json.RawMessage(`{"tool": "crm.find", "arguments": {"email": "a@b.c", "to": "kept"}}`), pii))
	if !strings.Contains(got, `"email":"[redacted]"`) || !strings.Contains(got, `"to":"kept"`) {
		t.Errorf("got %s", got)
	}
	var tel Telemetry
	tel.RedactPIIWith(pii)
	if got := string(RedactAudit(json.RawMessage(`{"tool": "x", "before": {"to": "a@b.c"}}`), tel.piiFields())); !strings.Contains(got, `"to":"[redacted]"`) {
		t.Errorf("the fields set are not used: %s", got)
	}
	if got := string(RedactAudit(json.RawMessage(`"not an object"`), pii)); got != `"not an object"` {
		t.Errorf("got %s", got)
	}
}
