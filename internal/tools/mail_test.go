package tools_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// smtpServer is a minimal SMTP receiver on loopback: it speaks just enough
// of RFC 5321 for one client, and refuses recipients at refuse.example.
type smtpServer struct {
	addr string
	mu   sync.Mutex
	from string
	to   []string
	data string
}

func newSMTPServer(t *testing.T) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{addr: ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn)
		}
	}()
	return s
}

func (s *smtpServer) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	say := func(line string) { conn.Write([]byte(line + "\r\n")) }
	say("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250-test")
			say("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL FROM:"):
			s.mu.Lock()
			s.from = strings.TrimSpace(line[len("MAIL FROM:"):])
			s.mu.Unlock()
			say("250 OK")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			if strings.Contains(cmd, "REFUSE.EXAMPLE") {
				say("550 No such user here")
				continue
			}
			s.mu.Lock()
			s.to = append(s.to, strings.TrimSpace(line[len("RCPT TO:"):]))
			s.mu.Unlock()
			say("250 OK")
		case cmd == "DATA":
			say("354 End data with <CR><LF>.<CR><LF>")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				b.WriteString(l)
			}
			s.mu.Lock()
			s.data = b.String()
			s.mu.Unlock()
			say("250 OK: queued")
		case cmd == "QUIT":
			say("221 Bye")
			return
		default:
			say("250 OK")
		}
	}
}

func TestEmailSend_DeliversOverSMTPWhenConfigured(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t)
	pool := dbtest.MustPool(t)
	ws := mustWorkspace(t, pool, "mail")
	r, err := tools.Builtin(tools.WithMailer(tools.SMTPMailer{Addr: srv.addr, From: "gatehouse@example.com"}))
	if err != nil {
		t.Fatal(err)
	}
	tool := mustTool(t, r, "email.send")

	res, err := run(t, pool, tool, ws, `{"to": "ana@example.com", "subject": "Verlängerung", "body": "Line one.\nLine two."}`)
	if err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	from, to, data := srv.from, srv.to, srv.data
	srv.mu.Unlock()
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
