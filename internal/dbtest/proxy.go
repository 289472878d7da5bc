package dbtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Proxy stands between a test's pool and its database and fails the way
// a database outage does: it cuts every connection at once, refuses new
// ones for a while, or cuts a connection at the moment its COMMIT goes
// out (before the server gets it, or after the server ran it and before
// its answer comes back).
type Proxy struct {
	// URL is the database's URL through the proxy.
	URL string

	tb     testing.TB
	ln     net.Listener
	target func() (net.Conn, error)

	mu        sync.Mutex
	links     map[*link]struct{}
	downUntil time.Time
	atCommit  *commitCut
}

// commitCut is an armed CutAtCommit.
type commitCut struct {
	marker    []byte
	delivered bool
	fired     chan struct{}
}

// link is one client connection and its server connection.
type link struct {
	client, server net.Conn
	// muted drops what the server sends (its answer to a COMMIT that is
	// to be lost); answered is signalled when that answer is complete.
	mu       sync.Mutex
	muted    bool
	answered chan struct{}
	once     sync.Once
	// marked: the client sent the armed cut's marker on this link.
	marked bool
}

// MustProxy starts a proxy to the database of rawURL (a URL from MustURL,
// over TCP or a Unix socket); it stops when the test ends.
func MustProxy(tb testing.TB, rawURL string) *Proxy {
	tb.Helper()
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		tb.Fatalf("dbtest: proxy: %v", err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if filepath.IsAbs(cfg.Host) {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("dbtest: proxy: %v", err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("dbtest: proxy: %v", err)
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	// In clear text, so that a COMMIT can be seen going out.
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
	p := &Proxy{URL: u.String(), tb: tb, ln: ln, links: map[*link]struct{}{},
		target: func() (net.Conn, error) { return net.DialTimeout(network, addr, 5*time.Second) }}
	go p.accept()
	tb.Cleanup(func() {
		ln.Close()
		p.Cut(false)
	})
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := time.Now().Before(p.downUntil)
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := p.target()
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s, answered: make(chan struct{})}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		go p.toServer(l)
		go p.toClient(l)
	}
}

// Cut closes every connection through the proxy at once: the client
// reads EOF, or with reset a connection reset (ECONNRESET).
func (p *Proxy) Cut(reset bool) {
	p.mu.Lock()
	links := p.links
	p.links = map[*link]struct{}{}
	p.mu.Unlock()
	for l := range links {
		l.close(reset)
	}
}

// Down cuts every connection and closes new ones at once for d, as a
// database that restarts does.
func (p *Proxy) Down(d time.Duration, reset bool) {
	p.mu.Lock()
	p.downUntil = time.Now().Add(d)
	p.mu.Unlock()
	p.Cut(reset)
}

// CutAtCommit arms the proxy for the next COMMIT a client sends on a
// connection that has sent marker (a value of the transaction's, so that
// other work on the pool goes through): with delivered, the server runs
// it and its answer is lost; without, it never reaches the server. Either
// way that connection is closed. The channel is closed once it happened.
func (p *Proxy) CutAtCommit(marker string, delivered bool) <-chan struct{} {
	c := &commitCut{marker: []byte(marker), delivered: delivered, fired: make(chan struct{})}
	p.mu.Lock()
	p.atCommit = c
	p.mu.Unlock()
	return c.fired
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// takeCommitCut disarms and returns the armed cut, if any.
func (p *Proxy) takeCommitCut() *commitCut {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.atCommit
	p.atCommit = nil
	return c
}

func (p *Proxy) armed() *commitCut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.atCommit
}

func (p *Proxy) toServer(l *link) {
	defer p.forget(l)
	defer l.close(false)
	buf := make([]byte, 64<<10)
	var tail []byte // the end of what went before, for a message split across reads
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if c := p.armed(); c != nil {
				seen := append(tail, chunk...)
				l.marked = l.marked || bytes.Contains(seen, c.marker)
				if l.marked && sendsCommit(seen) {
					if c := p.takeCommitCut(); c != nil {
						p.cutCommit(l, c, chunk)
						return
					}
				}
			}
			if _, werr := l.server.Write(chunk); werr != nil {
				return
			}
			tail = append(tail[:0], chunk[max(0, n-128):]...)
		}
		if err != nil {
			return
		}
	}
}

// cutCommit closes the link at its COMMIT, delivering it first (and
// waiting for the server's whole answer, which the client never gets)
// when c says so.
func (p *Proxy) cutCommit(l *link, c *commitCut, chunk []byte) {
	defer close(c.fired)
	if c.delivered {
		l.mu.Lock()
		l.muted = true
		l.mu.Unlock()
		if _, err := l.server.Write(chunk); err == nil {
			select {
			case <-l.answered:
			case <-time.After(5 * time.Second):
				p.tb.Errorf("dbtest: proxy: the server did not answer the COMMIT")
			}
		}
	}
	l.close(false)
}

func (p *Proxy) toClient(l *link) {
	defer p.forget(l)
	defer l.close(false)
	buf := make([]byte, 64<<10)
	var tail []byte
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			l.mu.Lock()
			muted := l.muted
			l.mu.Unlock()
			if muted {
				// ReadyForQuery ends the server's answer to the batch.
				if bytes.Contains(append(tail, chunk...), []byte{'Z', 0, 0, 0, 5}) {
					l.once.Do(func() { close(l.answered) })
				}
				tail = append(tail[:0], chunk[max(0, n-8):]...)
			} else if _, werr := l.client.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) close(reset bool) {
	if tc, ok := l.client.(*net.TCPConn); ok && reset {
		tc.SetLinger(0) // close sends RST
	}
	l.client.Close()
	l.server.Close()
}

// commitStatement is the name pgx gives "commit" in its statement cache,
// which a batch that ends with COMMIT binds.
var commitStatement = func() []byte {
	sum := sha256.Sum256([]byte("commit"))
	return []byte("stmtcache_" + hex.EncodeToString(sum[:24]))
}()

// sendsCommit reports whether b holds a COMMIT being run: a simple query
// "commit" (pgx's Tx.Commit), or a Bind of the cached "commit" statement
// to the unnamed portal (a batch's last statement). The Parse that
// prepares it is not one.
func sendsCommit(b []byte) bool {
	if bytes.Contains(b, []byte("Q\x00\x00\x00\x0bcommit\x00")) {
		return true
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], commitStatement)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(commitStatement)
		if at >= 6 && b[at-6] == 'B' && b[at-1] == 0 && end < len(b) && b[end] == 0 {
			return true
		}
		i = end
	}
}
