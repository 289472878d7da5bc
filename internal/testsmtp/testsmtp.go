// Package testsmtp is a minimal SMTP receiver on loopback for tests: it
// speaks just enough of RFC 5321 for Go's net/smtp client, keeps every
// message it is given, and refuses recipients at refuse.example.
package testsmtp

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// Message is one message as received.
type Message struct {
	From string
	To   []string
	Data string // headers and body, CRLF line ends, dot-unstuffed not
}

// Server receives mail until the test ends.
type Server struct {
	Addr string
	mu   sync.Mutex
	msgs []Message
}

// New starts a receiver on a free loopback port.
func New(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String()}
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

// Messages are the messages received so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

func (s *Server) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	say := func(line string) { conn.Write([]byte(line + "\r\n")) }
	var cur Message
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
			cur = Message{From: strings.TrimSpace(line[len("MAIL FROM:"):])}
			say("250 OK")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			if strings.Contains(cmd, "REFUSE.EXAMPLE") {
				say("550 No such user here")
				continue
			}
			cur.To = append(cur.To, strings.TrimSpace(line[len("RCPT TO:"):]))
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
			cur.Data = b.String()
			s.mu.Lock()
			s.msgs = append(s.msgs, cur)
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
