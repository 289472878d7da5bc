package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/internal/strictjson"
)

// Direct calls. A tools/call in a session this instance holds is what
// agents send most, and the SDK's way of answering it costs as much CPU
// again as the call itself: it decodes the body six times (each decode
// allocating a 32 KiB buffer, so the garbage collector runs often), hands
// the request through three goroutines and streams the answer as
// server-sent events, flushed. The gateway answers such a request itself:
// it decodes the body once (strictly), calls the very handler the SDK
// would (callTool) with the same request the SDK would build, and answers
// with one JSON object (application/json, which the transport allows for
// any POST). Everything else goes to the SDK, and so does a tools/call
// the gateway is not sure it answers exactly as the SDK would: one with
// _meta (a progress token needs the request's event stream), a batch, a
// tool the session was not shown, a session of the stateless revision, a
// request whose Mcp-Protocol-Version is not the session's, or one that
// carries the SEP-2243 headers (Mcp-Method, Mcp-Name, Mcp-Param-*).
//
// What the SDK does for every request of a session, the gateway does for
// these: the session must be open and initialized, and the request's
// token the one that opened it (otherwise the SDK answers 404 or 403);
// the session's idle timer is paused while the request runs (the SDK's
// sessionInfo.startPOST; here idleTimer, kept by the gateway for every
// request, so that a session used only by direct calls is not closed as
// idle); a call ends when the agent cancels it (notifications/cancelled,
// cancelDirect) or the session ends, and not when its connection drops.

// maxDirectBody is the largest body answered directly: the SDK's own limit
// (a larger one goes to the SDK, which refuses it).
const maxDirectBody = sdk.DefaultMaxRequestBodyBytes

// directCall is a tools/call the gateway answers itself.
type directCall struct {
	id        jsonrpc.ID
	tool      string
	arguments json.RawMessage
}

// serveDirect answers r, a POST in session s, when it is a tools/call it
// can answer as the SDK would; it reports whether it did. The caller has
// checked that r's token opened s.
func (g *Gateway) serveDirect(w http.ResponseWriter, r *http.Request, s *session) bool {
	ss, protocol, ok := s.open()
	if !ok || !directHeaders(r.Header, protocol) {
		return false
	}
	if p := ss.InitializeParams(); p == nil || p.ProtocolVersion >= protocolStateless {
		return false // not initialized (the SDK refuses it), or not 2025-11-25's
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxDirectBody+1))
	// Whatever is not answered here, the SDK reads from the start.
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > maxDirectBody {
		return false
	}
	call, ok := parseDirectCall(body)
	if !ok || !s.shows(call.tool) {
		return false
	}
	ti, err := verifyConnected(r.Context(), "", r)
	if err != nil {
		return false
	}
	ctx, done := s.callContext(r.Context(), call.id)
	defer done()
	req := &sdk.CallToolRequest{Session: ss, Params: &sdk.CallToolParamsRaw{Name: call.tool, Arguments: call.arguments},
		Extra: &sdk.RequestExtra{TokenInfo: ti, Header: r.Header}}
	res, err := s.callTool(call.tool)(ctx, req)
	out := &jsonrpc.Response{ID: call.id}
	switch {
	case err != nil:
		out.Error = wireError(err)
	case res == nil:
		out.Result = json.RawMessage("null") // as the SDK sends a nil result
	default:
		if res.Content == nil {
			res.Content = []sdk.Content{} // as the SDK answers: never "null"
		}
		if out.Result, err = json.Marshal(res); err != nil {
			out.Result, out.Error = nil, wireError(err)
		}
	}
	data, err := jsonrpc.EncodeMessage(out)
	if err != nil {
		g.log.Error("mcp: encode a tool call's answer", "err", err)
		http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
		return true
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return true
}

// directHeaders reports whether a POST's headers are ones the SDK would
// accept for a message of a 2025-11-25 session that negotiated protocol,
// with none of the headers whose checks only the SDK makes.
func directHeaders(h http.Header, protocol string) bool {
	if ct, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || ct != "application/json" {
		return false
	}
	if v := h.Get("Mcp-Protocol-Version"); v == "" || v != protocol || v >= protocolStateless {
		return false
	}
	jsonOK, streamOK := accepts(h.Values("Accept"))
	if !jsonOK || !streamOK {
		return false
	}
	for name := range h {
		switch n := http.CanonicalHeaderKey(name); {
		case n == "Last-Event-Id", n == "Mcp-Method", n == "Mcp-Name", strings.HasPrefix(n, "Mcp-Param-"):
			return false
		}
	}
	return true
}

// accepts reads an Accept header as the SDK does: whether it takes JSON,
// and an event stream.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// parseDirectCall reads a body that is exactly one JSON-RPC request
// {"jsonrpc": "2.0", "id": <integer or string>, "method": "tools/call",
// "params": {"name": <string>, "arguments": <object>}}, read strictly (no
// duplicate key, no other member, keys as spelled): anything else is the
// SDK's to answer.
func parseDirectCall(body []byte) (directCall, bool) {
	var msg map[string]json.RawMessage
	if strictjson.Decode(body, &msg, strictjson.Limits{}, false) != nil || len(msg) != 4 {
		return directCall{}, false
	}
	var version, method string
	if json.Unmarshal(msg["jsonrpc"], &version) != nil || version != "2.0" ||
		json.Unmarshal(msg["method"], &method) != nil || method != "tools/call" {
		return directCall{}, false
	}
	id, ok := directID(msg["id"])
	if !ok {
		return directCall{}, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return directCall{}, false
	}
	call := directCall{id: id, arguments: params["arguments"]}
	for k := range params {
		if k != "name" && k != "arguments" {
			return directCall{}, false // _meta (a progress token), or what only the SDK knows
		}
	}
	if json.Unmarshal(params["name"], &call.tool) != nil || call.tool == "" {
		return directCall{}, false
	}
	if a := bytes.TrimSpace(call.arguments); len(a) > 0 && a[0] != '{' {
		return directCall{}, false
	}
	return call, true
}

// directID is a request id the SDK keeps as it is: a string, or an
// integer that a float64 holds exactly.
func directID(raw json.RawMessage) (jsonrpc.ID, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if raw == nil || dec.Decode(&v) != nil {
		return jsonrpc.ID{}, false
	}
	switch x := v.(type) {
	case string:
		id, err := jsonrpc.MakeID(x)
		return id, err == nil
	case json.Number:
		n, err := x.Int64()
		if err != nil || n < -(1<<53) || n > 1<<53 {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(float64(n))
		return id, err == nil
	}
	return jsonrpc.ID{}, false
}

// wireError is a handler's error as the SDK's JSON-RPC layer sends it:
// its code when it is a JSON-RPC error, 0 otherwise, and its message.
func wireError(err error) *jsonrpc.Error {
	out := &jsonrpc.Error{Message: err.Error()}
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		out.Code = je.Code
	}
	return out
}

// shows reports whether the session was shown the registry tool name
// (so its handler is callTool).
func (s *session) shows(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.shown[name]
	return ok
}

// open is the session's SDK session and the protocol revision it
// negotiated, unless it ended or is ending.
func (s *session) open() (*sdk.ServerSession, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ss == nil || s.closed || s.stateless {
		return nil, "", false
	}
	return s.ss, s.protocol, true
}

// callContext is the context of a direct call: the request's values, not
// ended when its connection drops (as the SDK's is not), but by the
// agent's notifications/cancelled for id or by the session's end. done
// forgets the call.
func (s *session) callContext(parent context.Context, id jsonrpc.ID) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	stop := context.AfterFunc(s.ctx, cancel)
	s.mu.Lock()
	s.calls[id] = cancel
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.calls, id)
		s.mu.Unlock()
		stop()
		cancel()
	}
}

// cancelDirect ends a direct call the agent cancels
// (notifications/cancelled names its request id); the SDK ends its own.
func (s *session) cancelDirect(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "notifications/cancelled" {
			if p, ok := req.GetParams().(*sdk.CancelledParams); ok && p != nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					s.mu.Lock()
					cancel := s.calls[id]
					s.mu.Unlock()
					if cancel != nil {
						cancel()
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}

// idleTimer closes a session left idle for the session timeout: no
// request of it in flight, and none for that long. It is the SDK's
// (sessionInfo), kept by the gateway, which sees every request, direct
// calls included.
type idleTimer struct {
	mu      sync.Mutex
	timeout time.Duration
	refs    int
	timer   *time.Timer
}

// start arms the timer: close runs once the session has been idle for
// timeout.
func (t *idleTimer) start(timeout time.Duration, close func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil && timeout > 0 {
		t.timeout, t.timer = timeout, time.AfterFunc(timeout, close)
	}
}

// startPOST pauses the timer while a request of the session runs.
func (t *idleTimer) startPOST() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		return
	}
	if t.refs == 0 {
		t.timer.Stop()
	}
	t.refs++
}

// endPOST starts the timer again once no request of the session runs.
func (t *idleTimer) endPOST() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer == nil {
		return
	}
	t.refs--
	if t.refs == 0 {
		t.timer.Reset(t.timeout)
	}
}

// stop stops the timer for good (the session ended).
func (t *idleTimer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// tokenOf is the id of the token that opened the session (uuid.Nil until
// it initialized).
func (s *session) tokenOf() uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}
