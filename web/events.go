package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/events"
	"github.com/gatehouse/gatehouse/internal/mcp"
)

// Live pages follow changes through server-sent events. Services announce
// a change after it commits (internal/events: a Bus that sends the
// distinct "<workspace id>:<topic>" payloads in batches with NOTIFY), so a
// change on one instance reaches the pages open on every instance: each
// instance LISTENs on one connection and fans the events out to its
// streams. A page re-renders what changed from the database when told,
// and once more whenever its stream (re)connects, so a lost event costs
// nothing but a moment's delay.

const eventsChannel = events.Channel

// hub fans workspace events out to subscribers.
type hub struct {
	mu   sync.Mutex
	subs map[uuid.UUID]map[*subscription]struct{}
}

// subscription is one open stream: the topics it wants, named as the
// page's events.
type subscription struct {
	ch    chan sent
	event func(topic string) (string, bool)
}

// sent is one event on a stream: its name (what the page listens for) and
// its topic (the data).
type sent struct{ name, topic string }

func newHub() *hub { return &hub{subs: map[uuid.UUID]map[*subscription]struct{}{}} }

// subscribe returns a channel of the workspace's topics that event
// accepts, with the names it gives them, and a function that ends the
// subscription.
func (h *hub) subscribe(ws uuid.UUID, event func(topic string) (string, bool)) (<-chan sent, func()) {
	sub := &subscription{ch: make(chan sent, 8), event: event}
	h.mu.Lock()
	if h.subs[ws] == nil {
		h.subs[ws] = map[*subscription]struct{}{}
	}
	h.subs[ws][sub] = struct{}{}
	h.mu.Unlock()
	return sub.ch, func() {
		h.mu.Lock()
		delete(h.subs[ws], sub)
		if len(h.subs[ws]) == 0 {
			delete(h.subs, ws)
		}
		h.mu.Unlock()
	}
}

// publish delivers a topic to the workspace's subscribers that want it; a
// subscriber that is behind already has events pending, and one refresh
// reads everything that changed.
func (h *hub) publish(ws uuid.UUID, topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs[ws] {
		name, ok := sub.event(topic)
		if !ok {
			continue
		}
		select {
		case sub.ch <- sent{name, topic}:
		default:
		}
	}
}

// announce tells every instance's pages about a change the web layer made
// itself (a message posted, a mode changed), after it committed.
func (s *Server) announce(ws uuid.UUID, topics ...string) {
	for _, t := range topics {
		s.bus.Announce(ws, t)
	}
}

// listen relays NOTIFY payloads ("<workspace id>:<topic>") to the hub
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
	// Pins are trusted as read while changes to them are heard here
	// (internal/mcp, checkPin), and read for every call while not.
	s.upstreams.SetListening(true)
	defer s.upstreams.SetListening(false)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == mcp.PinsChangedEvent {
			// A pin changed on some instance (a definition seen, held,
			// accepted): check calls against it, and show this instance's
			// MCP sessions what they may call now.
			if err := s.upstreams.ReloadPins(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reloading upstream pins", "err", err)
			}
			continue
		}
		if id, ok := strings.CutPrefix(n.Payload, mcp.SessionClosedEvent); ok {
			// A client ended its MCP session on some instance: close
			// this instance's copy.
			if s.gateway != nil {
				s.gateway.Forget(id)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(n.Payload, auth.TokenRevokedEvent); ok {
			// A token was revoked (here or on another instance): stop believing
			// it, and end its MCP sessions' open streams.
			if id, err := uuid.Parse(rest); err == nil {
				if s.auth != nil {
					s.auth.ForgetToken(id)
				}
				if s.gateway != nil {
					s.gateway.ForgetToken(id) // end the MCP event streams it holds open
				}
			}
			continue
		}
		wsID, topic, ok := strings.Cut(n.Payload, ":")
		if ws, err := uuid.Parse(wsID); ok && err == nil {
			s.events.publish(ws, topic)
		}
		if s.chat != nil && strings.HasPrefix(topic, events.TopicConversationPrefix) {
			s.chat.Wake() // a call resolved, on any instance: resume what waits (web/chat.go)
		}
	}
}

// topicEvents maps the topics a page follows to the names of its events:
// a scope's own topic, what waits for the signed-in user (the nav counts)
// and, for those who resolve packets, the approvals.
func topicEvents(p auth.Principal, scope string) func(string) (string, bool) {
	mine := events.User(p.UserID)
	resolver := p.CanResolveSome()
	return func(topic string) (string, bool) {
		switch {
		case scope != "" && topic == scope:
			name, _, _ := strings.Cut(topic, ".")
			return name, true
		case topic == mine:
			return "user", true
		case topic == events.TopicApprovals && resolver:
			return events.TopicApprovals, true
		}
		return "", false
	}
}

// streamEvents handles "GET /admin/approvals/events": the queue follows
// the workspace's packets.
func (s *Server) streamEvents(c echo.Context) error {
	return s.stream(c, func(topic string) (string, bool) {
		return topic, topic == events.TopicApprovals
	})
}

// homeEvents handles "GET /events": what waits for the signed-in user
// (home and nav counts).
func (s *Server) homeEvents(c echo.Context) error {
	return s.stream(c, topicEvents(principal(c), ""))
}

// stream is a server-sent event stream of the caller's workspace events
// that event accepts, with a heartbeat so proxies keep it open. It ends
// when the client leaves or the server shuts down.
func (s *Server) stream(c echo.Context, event func(string) (string, bool)) error {
	ch, done := s.events.subscribe(principal(c).WorkspaceID, event)
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
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.topic)
		case <-heartbeat.C:
			fmt.Fprint(w, ": heartbeat\n\n")
		}
		w.Flush()
	}
}
