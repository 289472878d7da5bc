package tools

import (
	"context"
	"crypto/tls"
	"fmt"
	"mime"
	"net"
	"net/smtp"
	"strings"
	"time"
)

// smtpTimeout bounds one SMTP delivery when the mailer names no timeout.
const smtpTimeout = 15 * time.Second

// Mailer delivers email.send's messages. Without one, mail is held in the
// workspace outbox.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// SMTPMailer delivers over SMTP: STARTTLS whenever the server offers it,
// and always before a password is sent (net/smtp refuses plain auth over an
// unencrypted connection except to localhost).
type SMTPMailer struct {
	Addr     string // host:port
	From     string
	Username string
	Password string
	// Timeout bounds one delivery; 15 s when zero.
	Timeout time.Duration
}

// Send delivers one plain-text message.
func (m SMTPMailer) Send(ctx context.Context, to, subject, body string) error {
	timeout := m.Timeout
	if timeout == 0 {
		timeout = smtpTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("smtp: address %q: %w", m.Addr, err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("smtp: connect: %w", err)
	}
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp: greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("smtp: starttls: %w", err)
		}
	}
	if m.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", m.Username, m.Password, host)); err != nil {
			return fmt.Errorf("smtp: auth: %w", err)
		}
	}
	if err := c.Mail(m.From); err != nil {
		return fmt.Errorf("smtp: from: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp: to: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp: data: %w", err)
	}
	if _, err := w.Write(message(m.From, to, subject, body)); err != nil {
		return fmt.Errorf("smtp: write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp: send: %w", err)
	}
	return c.Quit()
}

// message is an RFC 5322 plain-text message; header values cannot carry
// line breaks (the schema's patterns already refuse them in "to").
func message(from, to, subject, body string) []byte {
	clean := func(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		clean(from), clean(to), mime.QEncoding.Encode("utf-8", clean(subject)), time.Now().UTC().Format(time.RFC1123Z))
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n"))
	return []byte(b.String())
}
