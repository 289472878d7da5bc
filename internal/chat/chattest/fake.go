// Package chattest is a fake OpenAI-compatible chat completions endpoint
// for tests: real HTTP and the real wire format (server-sent event chunks,
// tool-call deltas split across chunks, parallel calls, usage in the last
// chunk, data: [DONE]), answering scripted responses in order and
// recording every request.
package chattest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Call is a tool call the fake model makes.
type Call struct {
	ID, Name  string
	Arguments string // as the model sends it: JSON, or not
}

// Response is one scripted answer.
type Response struct {
	// Text is sent in these chunks.
	Text []string
	// Calls are sent as deltas: the id and name first, the arguments in
	// two halves, interleaved between parallel calls.
	Calls []Call
	// PromptTokens and CompletionTokens are the usage in the last chunk.
	PromptTokens, CompletionTokens int64
	// Status, when set, answers with this HTTP status and an OpenAI error
	// body carrying ErrorMessage.
	Status       int
	ErrorMessage string
	// Hold, when set, makes the answer wait after its first text chunk
	// until it is closed or the client goes away.
	Hold chan struct{}
	// Started is closed when the request arrived (optional).
	Started chan struct{}
}

// Request is a request the fake model received.
type Request struct {
	Authorization string
	Body          map[string]any
}

// Messages are the request's messages.
func (r Request) Messages() []map[string]any {
	list, _ := r.Body["messages"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, m := range list {
		if mm, ok := m.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// ToolResult is the content of the tool message answering toolCallID, and
// whether there is one.
func (r Request) ToolResult(toolCallID string) (map[string]any, bool) {
	for _, m := range r.Messages() {
		if m["role"] == "tool" && m["tool_call_id"] == toolCallID {
			var out map[string]any
			s, _ := m["content"].(string)
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				return map[string]any{"raw": s}, true
			}
			return out, true
		}
	}
	return nil, false
}

// Model is the fake endpoint.
type Model struct {
	URL string // the base URL, ending in /v1
	srv *httptest.Server

	mu       sync.Mutex
	script   []Response
	requests []Request
}

// New starts a fake endpoint answering the responses in order; it stops
// with the test.
func New(tb testing.TB, script ...Response) *Model {
	tb.Helper()
	m := &Model{script: script}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	tb.Cleanup(m.srv.Close)
	m.URL = m.srv.URL + "/v1"
	return m
}

// Add appends responses to the script.
func (m *Model) Add(rs ...Response) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = append(m.script, rs...)
}

// Requests returns the requests received so far.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.requests...)
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, Request{Authorization: r.Header.Get("Authorization"), Body: body})
	var resp Response
	ok := len(m.script) > 0
	if ok {
		resp, m.script = m.script[0], m.script[1:]
	}
	m.mu.Unlock()
	if !ok {
		resp = Response{Status: http.StatusInternalServerError, ErrorMessage: "the fake model has no scripted response left"}
	}
	if resp.Started != nil {
		close(resp.Started)
	}
	if resp.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.Status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": resp.ErrorMessage, "type": "server_error", "param": nil, "code": nil}})
		return
	}
	if body["stream"] != true {
		http.Error(w, `{"error":{"message":"the fake model only streams"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	model, _ := body["model"].(string)
	send := func(delta map[string]any, finish any) {
		chunk := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, t := range resp.Text {
		send(map[string]any{"content": t}, nil)
		if i == 0 && resp.Hold != nil {
			select {
			case <-resp.Hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	if len(resp.Text) == 0 && resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-r.Context().Done():
			return
		}
	}
	for i, c := range resp.Calls {
		send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil)
	}
	halves := make([][2]string, len(resp.Calls))
	for i, c := range resp.Calls {
		half := len(c.Arguments) / 2
		halves[i] = [2]string{c.Arguments[:half], c.Arguments[half:]}
	}
	for part := 0; part < 2; part++ {
		for i := range resp.Calls {
			send(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": halves[i][part]}}}}, nil)
		}
	}
	finish := "stop"
	if len(resp.Calls) > 0 {
		finish = "tool_calls"
	}
	send(map[string]any{}, finish)
	usage := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": resp.PromptTokens, "completion_tokens": resp.CompletionTokens, "total_tokens": resp.PromptTokens + resp.CompletionTokens}}
	b, _ := json.Marshal(usage)
	fmt.Fprintf(w, "data: %s\n\n", b)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
