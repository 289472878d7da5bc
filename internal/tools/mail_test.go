package tools_test

import (
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/testsmtp"
	"github.com/gatehouse/gatehouse/internal/tools"
)

func TestEmailSend_DeliversOverSMTPWhenConfigured(t *testing.T) {
	t.Parallel()
	srv := testsmtp.New(t)
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "mail")
	r, err := tools.Builtin(tools.WithMailer(tools.SMTPMailer{Addr: srv.Addr, From: "gatehouse@example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	tool := mustTool(t, r, "email.send")

	res, err := run(t, pool, tool, ws, `{"to": "ana@example.com", "subject": "Verlängerung", "body": "Line one.\nLine two."}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages received, want 1", len(msgs))
	}
	from, to, data := msgs[0].From, msgs[0].To, msgs[0].Data
	if !strings.HasPrefix(from, "<gatehouse@example.com>") || len(to) != 1 || to[0] != "<ana@example.com>" {
		t.Fatalf("envelope from %q to %v", from, to)
	}
	for _, want := range []string{"From: gatehouse@example.com\r\n", "To: ana@example.com\r\n", "Subject: =?utf-8?q?Verl=C3=A4ngerung?=\r\n",
		"Content-Type: text/plain; charset=utf-8\r\n", "\r\n\r\nLine one.\r\nLine two."} {
		if !strings.Contains(data, want) {
			t.Errorf("the message lacks %q:\n%s", want, data)
		}
	}
	if res["delivered_to"] != "smtp" {
		t.Errorf("result %v", res)
	}
	if rows := mustOutbox(t, pool, ws); len(rows) != 1 {
		t.Errorf("%d outbox records, want 1 (the sent mail is recorded)", len(rows))
	}

	// A recipient the server refuses: the call fails, and nothing is recorded.
	if _, err := run(t, pool, tool, ws, `{"to": "bob@refuse.example", "subject": "Hi", "body": "x"}`); err == nil || !strings.Contains(err.Error(), "No such user") {
		t.Fatalf("a refused recipient: %v", err)
	}
	if rows := mustOutbox(t, pool, ws); len(rows) != 1 {
		t.Errorf("%d outbox records after a refusal, want 1", len(rows))
	}
}
