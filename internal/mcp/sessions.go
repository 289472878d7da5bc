package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// Sessions on any instance. The SDK keeps a session in the memory of the
// process that answered its initialize; behind a balancer without
// stickiness, the session's next request reaches another instance, which
// answered "session not found". So each session is also a row
// (mcp_sessions, migration 40), written as its initialize succeeds, and an
// instance that receives a request for a session it does not hold takes
// it up: it reads the row (the same token's, open, not idle past the
// session timeout) and replays the client's initialize to its own SDK
// handler under the session's id, then serves the request. From then on
// both instances hold the session; each shows it the tools it may call and
// tells it when they change. A DELETE closes the row and every instance's
// copy (SessionClosedEvent).
//
// What does not cross instances: a call in flight is answered by the
// instance that received it (progress included), and a standalone SSE
// stream (GET) receives what the instance holding it sends.

// sessionIDHeader is Streamable HTTP's session header.
const sessionIDHeader = "Mcp-Session-Id"

// SessionClosedEvent, followed by a session id, is the event (on the
// events channel every instance LISTENs on) that a client ended its
// session: each instance closes its copy (Forget).
const SessionClosedEvent = "mcp:closed:"

// touchEvery is how often an instance writes a session's seen_at while
// the session is used (more often under a session timeout shorter than
// two of it: touchInterval).
const touchEvery = time.Minute

// touchInterval is how often an instance writes a session's seen_at: at
// most once a minute, and at least twice per session timeout, so that a
// session in use never looks idle to the other instances.
func (g *Gateway) touchInterval() time.Duration { return min(touchEvery, g.sessionTimeout()/2) }

// newSessionID draws a session id: 128 random bits (the spec asks for a
// globally unique, cryptographically secure id).
func newSessionID() string { return rand.Text() }

// restore makes s the session its row describes.
func (s *session) restore(row *db.McpSession) {
	s.id, s.stored, s.client, s.touched = row.ID, true, row.ClientName, time.Now()
	s.token, s.protocol = row.TokenID, row.ProtocolVersion
	switch {
	case row.Planned:
		s.planned, s.chosen = row.ConversationID.UUID, nil
	case row.ConversationID.Valid:
		scope := proposals.InConversation(row.ConversationID.UUID)
		s.chosen = &scope
	case row.NotebookID.Valid:
		scope := proposals.InNotebook(row.NotebookID.UUID)
		s.chosen = &scope
	}
}

// store writes the session's row as its initialize succeeds (not when the
// session is being taken up: its row exists).
func (s *session) store(ctx context.Context, req sdk.Request, ir *sdk.InitializeResult) error {
	q := s.g.opts.Queries
	if q == nil || s.stored {
		return nil
	}
	p, ok := principalOf(req.GetExtra())
	params, _ := req.GetParams().(*sdk.InitializeParams)
	if !ok || params == nil || ir == nil {
		return errors.New("mcp: an initialize without its principal or parameters")
	}
	init, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("mcp: encode the session's initialize: %w", err)
	}
	s.mu.Lock()
	row := db.InsertMCPSessionParams{WorkspaceID: p.WorkspaceID, ID: s.id, TokenID: p.TokenID, OwnerID: p.UserID,
		ClientName: clip.Runes(s.client, 200), Initialize: init, ProtocolVersion: ir.ProtocolVersion}
	switch {
	case s.chosen == nil:
		row.ConversationID, row.Planned = uuid.NullUUID{UUID: s.planned, Valid: true}, true
	case s.chosen.Kind == proposals.ScopeNotebook:
		row.NotebookID = uuid.NullUUID{UUID: s.chosen.ID, Valid: true}
	default:
		row.ConversationID = uuid.NullUUID{UUID: s.chosen.ID, Valid: true}
	}
	s.touched = time.Now()
	s.mu.Unlock()
	if err := q.InsertMCPSession(ctx, row); err != nil {
		return fmt.Errorf("mcp: store the session: %w", err)
	}
	return nil
}

// takeUp prepares a request of session id for the SDK's handler: a DELETE
// closes the session on every instance; a session this instance holds is
// marked used; one it does not hold is taken up when its row allows. It
// reports whether it answered the request itself.
func (g *Gateway) takeUp(w http.ResponseWriter, r *http.Request, id string) bool {
	q, c := g.opts.Queries, connectionOf(r.Context())
	if q == nil || c == nil {
		return false
	}
	ctx, p := r.Context(), c.Principal
	g.liveMu.Lock()
	held := g.live[id]
	g.liveMu.Unlock()
	if r.Method == http.MethodDelete {
		n, err := q.CloseMCPSession(ctx, db.CloseMCPSessionParams{WorkspaceID: p.WorkspaceID, ID: id, TokenID: p.TokenID})
		if err != nil {
			return g.unavailable(w, "close a session", err)
		}
		if n == 0 {
			return false // not this token's, or not open: the SDK answers 403 or 404
		}
		// Closed here, not by the SDK after this returns: this instance's
		// own listener hears the NOTIFY too, and closing the copy on it
		// could beat the SDK to the session, which then answered 404.
		if err := q.Notify(ctx, SessionClosedEvent+id); err != nil {
			g.log.Warn("mcp: tell the other instances a session closed", "err", err)
		}
		g.Forget(id)
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	if held != nil {
		if !held.touch(ctx, p.WorkspaceID) {
			// Closed on another instance, and its notification missed:
			// the SDK answers 404 once the copy is gone.
			held.close()
		}
		return false
	}
	row, err := q.GetLiveMCPSession(ctx, db.GetLiveMCPSessionParams{WorkspaceID: p.WorkspaceID, ID: id, TokenID: p.TokenID,
		IdleSince: time.Now().Add(-g.sessionTimeout())})
	if errors.Is(err, pgx.ErrNoRows) {
		return false // the SDK answers 404: the client starts a new session
	}
	if err != nil {
		return g.unavailable(w, "read a session", err)
	}
	if err := g.adopt(r, c, &row); err != nil {
		return g.unavailable(w, "take up a session", err)
	}
	return false
}

// adopt replays session row's initialize (and initialized) to this
// instance's SDK handler under its id, so that the SDK holds the session
// as the client set it up; done once per id at a time.
func (g *Gateway) adopt(r *http.Request, c *Connection, row *db.McpSession) error {
	g.liveMu.Lock()
	mu := g.takingUp[row.ID]
	if mu == nil {
		mu = &sync.Mutex{}
		g.takingUp[row.ID] = mu
	}
	g.liveMu.Unlock()
	mu.Lock()
	defer func() {
		mu.Unlock()
		g.liveMu.Lock()
		delete(g.takingUp, row.ID)
		g.liveMu.Unlock()
	}()
	g.liveMu.Lock()
	held := g.live[row.ID] != nil
	g.liveMu.Unlock()
	if held {
		return nil // taken up by a request that came at the same time
	}
	// The replay outlives the request that asked for it (the SDK ties the
	// session to the context of the request that opens it).
	replay := *c
	replay.server, replay.stored = nil, row
	ctx := context.WithValue(context.WithoutCancel(r.Context()), connectionKey{}, &replay)
	send := func(body string, session bool, want int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL.String(), bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		if session {
			req.Header.Set(sessionIDHeader, row.ID)
			req.Header.Set("Mcp-Protocol-Version", row.ProtocolVersion)
		}
		rec := &discard{header: http.Header{}}
		g.handler.ServeHTTP(rec, req)
		if rec.status != want {
			return fmt.Errorf("replayed %.40s: status %d, want %d", body, rec.status, want)
		}
		if !session && rec.header.Get(sessionIDHeader) != row.ID {
			return fmt.Errorf("replayed initialize: session %q, want the stored one", rec.header.Get(sessionIDHeader))
		}
		return nil
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + string(row.Initialize) + `}`
	if err := send(init, false, http.StatusOK); err != nil {
		return err
	}
	return send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, true, http.StatusAccepted)
}

// touch writes the session's seen_at, at most once a minute per instance,
// so that the other instances know it is in use. It reports false when
// the row says the session is closed: a DELETE on another instance whose
// notification this one missed is seen here within a minute.
func (s *session) touch(ctx context.Context, workspaceID uuid.UUID) bool {
	s.mu.Lock()
	due := time.Since(s.touched) >= s.g.touchInterval()
	if due {
		s.touched = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return true
	}
	n, err := s.g.opts.Queries.TouchMCPSession(ctx, db.TouchMCPSessionParams{WorkspaceID: workspaceID, ID: s.id})
	if err != nil {
		s.g.log.Warn("mcp: mark a session used", "err", err)
		return true
	}
	return n > 0
}

// Forget closes this instance's copy of a session that its client ended
// on another instance.
func (g *Gateway) Forget(id string) {
	g.liveMu.Lock()
	s := g.live[id]
	g.liveMu.Unlock()
	if s != nil {
		s.close()
	}
}

// ForgetToken closes this instance's copies of the sessions a revoked
// token opened: its requests are refused already (the token no longer
// authenticates), and this ends the event streams it still holds open,
// which would otherwise go on carrying notifications until the session
// idled.
func (g *Gateway) ForgetToken(id uuid.UUID) {
	g.liveMu.Lock()
	var gone []*session
	for _, s := range g.live {
		if s.token == id {
			gone = append(gone, s)
		}
	}
	g.liveMu.Unlock()
	for _, s := range gone {
		s.close()
	}
}

// close ends this instance's copy of the session: from now on no request
// is answered in it (a direct call included), and the SDK closes it.
func (s *session) close() {
	s.mu.Lock()
	ss := s.ss
	s.closed = true
	s.mu.Unlock()
	if ss != nil {
		ss.Close()
	}
}

// unavailable answers a request whose session could not be read or
// written: 503, a JSON-RPC error the client may retry.
func (g *Gateway) unavailable(w http.ResponseWriter, what string, err error) bool {
	g.log.Error("mcp: "+what, "err", err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"The session could not be read; try again."}}`))
	return true
}

// discard is the response writer of a replayed request: it keeps the
// status and headers and drops the body.
type discard struct {
	header http.Header
	status int
}

func (d *discard) Header() http.Header { return d.header }
func (d *discard) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	return len(b), nil
}
func (d *discard) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}
func (d *discard) Flush() {}
