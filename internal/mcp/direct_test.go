package mcp

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func TestParseDirectCall_TakesOnlyAPlainToolsCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		ok         bool
		tool, id   string
	}{
		{"a plain call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"records.get","arguments":{"key":"k"}}}`, true, "records.get", "7"},
		{"a string id", `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x.y","arguments":{}}}`, true, "x.y", `"a-1"`},
		{"no arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y"}}`, true, "x.y", "1"},
		{"members in another order", `{"params":{"arguments":{},"name":"x.y"},"method":"tools/call","id":-3,"jsonrpc":"2.0"}`, true, "x.y", "-3"},
		{"_meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y","_meta":{"progressToken":1}}}`, false, "", ""},
		{"another param", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y","requestState":"s"}}`, false, "", ""},
		{"another method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, false, "", ""},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"an exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a huge id", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"another version", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a duplicated member", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a duplicated param", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a.b","name":"x.y"}}`, false, "", ""},
		{"a member spelled otherwise", `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"x.y"}}`, false, "", ""},
		{"a param spelled otherwise", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"x.y"}}`, false, "", ""},
		{"an extra member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y"},"extra":1}`, false, "", ""},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, false, "", ""},
		{"arguments not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y","arguments":[1]}}`, false, "", ""},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y"}}]`, false, "", ""},
		{"a NUL", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x.y\\u0000\"}}", false, "", ""},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x.y"}} {}`, false, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			call, ok := parseDirectCall([]byte(c.body))
			if ok != c.ok {
				t.Fatalf("ok %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			id, err := json.Marshal(call.id.Raw())
			if err != nil || call.tool != c.tool || string(id) != c.id {
				t.Fatalf("tool %q id %s (%v), want %q %s", call.tool, id, err, c.tool, c.id)
			}
		})
	}
}

func TestDirectHeaders_AreTheSessionsAndNothingOnlyTheSDKChecks(t *testing.T) {
	t.Parallel()
	base := func() http.Header {
		return http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	}
	for _, c := range []struct {
		name   string
		change func(http.Header)
		ok     bool
	}{
		{"the session's", func(http.Header) {}, true},
		{"a charset", func(h http.Header) { h.Set("Content-Type", "application/json; charset=utf-8") }, true},
		{"accept anything", func(h http.Header) { h.Set("Accept", "*/*") }, true},
		{"no event stream accepted", func(h http.Header) { h.Set("Accept", "application/json") }, false},
		{"another content type", func(h http.Header) { h.Set("Content-Type", "text/plain") }, false},
		{"no protocol version", func(h http.Header) { h.Del("Mcp-Protocol-Version") }, false},
		{"another protocol version", func(h http.Header) { h.Set("Mcp-Protocol-Version", "2025-06-18") }, false},
		{"Mcp-Method", func(h http.Header) { h.Set("Mcp-Method", "tools/call") }, false},
		{"Mcp-Name", func(h http.Header) { h.Set("Mcp-Name", "x.y") }, false},
		{"Mcp-Param-*", func(h http.Header) { h.Set("Mcp-Param-Key", "k") }, false},
		{"Last-Event-ID", func(h http.Header) { h.Set("Last-Event-ID", "1") }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := base()
			c.change(h)
			if got := directHeaders(h, "2025-11-25"); got != c.ok {
				t.Fatalf("%v, want %v", got, c.ok)
			}
		})
	}
	if directHeaders(base(), "2025-06-18") {
		t.Error("a header other than the session's negotiated version")
	}
	h := base()
	h.Set("Mcp-Protocol-Version", protocolStateless)
	if directHeaders(h, protocolStateless) {
		t.Error("the stateless revision")
	}
}

// The idle timer closes a session once no request of it has run for the
// timeout, and never while one runs.
func TestIdleTimer_ClosesOnlyAfterTheTimeoutWithNothingInFlight(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	var it idleTimer
	it.start(100*time.Millisecond, func() { close(closed) })
	it.startPOST()
	select {
	case <-closed:
		t.Fatal("closed while a request ran")
	case <-time.After(300 * time.Millisecond):
	}
	it.endPOST()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("not closed after the timeout")
	}
	it.stop()
	it.startPOST() // after stop: nothing
	it.endPOST()
}
