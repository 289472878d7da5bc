package web

import (
	"context"
	"fmt"
	"github.com/gatehouse/gatehouse/internal/auth"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// Live pages (the approvals queue) follow changes through server-sent
// events. Changes are announced with PostgreSQL's NOTIFY, so a packet
// resolved on one instance reaches the pages open on every instance; each
// instance LISTENs on one connection and fans events out to its streams.

const eventsChannel = "gatehouse_events"

// hub fans workspace events out to subscribers.
type hub struct {
	mu   sync.Mutex
	subs map[uuid.UUID]map[chan string]struct{}
}

func newHub() *hub { return &hub{subs: map[uuid.UUID]map[chan string]struct{}{}} }

// subscribe returns a channel of event names for the workspace and a
// function that ends the subscription.
func (h *hub) subscribe(ws uuid.UUID) (<-chan string, func()) {
	ch := make(chan string, 8)
	h.mu.Lock()
	if h.subs[ws] == nil {
		h.subs[ws] = map[chan string]struct{}{}
	}
	h.subs[ws][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[ws], ch)
		h.mu.Unlock()
	}
}

// publish delivers an event to the workspace's subscribers; a subscriber
// that is behind already has an event pending, which is enough to refresh.
func (h *hub) publish(ws uuid.UUID, event string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[ws] {
		select {
		case ch <- event:
		default:
		}
	}
}

// listen relays NOTIFY payloads ("<workspace id>:<event>") to the hub
// until ctx ends, reconnecting after a lost connection.
func (s *Server) listen(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listening for events", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (s *Server) listenOnce(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+eventsChannel)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(n.Payload, auth.TokenRevokedEvent); ok {
			// Another instance revoked a token: stop believing it here too.
			if id, err := uuid.Parse(rest); err == nil && s.auth != nil {
				s.auth.ForgetToken(id)
			}
			continue
		}
		wsID, event, ok := strings.Cut(n.Payload, ":")
		if ws, err := uuid.Parse(wsID); ok && err == nil {
			s.events.publish(ws, event)
		}
	}
}

// streamEvents is a server-sent event stream of the caller's workspace
// events, with a heartbeat so proxies keep it open. It ends when the
// client leaves or the server shuts down.
func (s *Server) streamEvents(c echo.Context) error {
	ch, done := s.events.subscribe(principal(c).WorkspaceID)
	defer done()
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	w.Flush()
	heartbeat := time.NewTicker(25 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-c.Request().Context().Done():
			return nil
		case <-s.bg.Done():
			return nil
		case ev := <-ch:
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev, ev)
		case <-heartbeat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
		}
		w.Flush()
	}
}
