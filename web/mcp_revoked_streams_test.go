package web_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehouse/gatehouse/internal/auth"
)

// openStream opens the session's event stream (GET /mcp) on base and
// returns a channel closed when the server ends it.
func openStream(t *testing.T, m *mcpRaw, base string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Mcp-Session-Id", m.session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET /mcp: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
	}()
	return ended
}

// A revoked token's open event streams end, on the instance that revoked
// it and on another that holds its session, when the revocation's
// notification arrives: before, its requests were refused but a stream
// kept carrying notifications until the session idled.
func TestMCP_ARevokedTokensOpenStreamsEndOnEveryInstance(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	a.user("owner@example.com", auth.RoleMember)
	agent := a.token("owner@example.com", auth.TokenAgent)
	m := openMCP(t, a.url, agent, nil)
	other := openMCP(t, b.url, a.token("owner@example.com", auth.TokenAgent), nil)
	onA, onB := openStream(t, m, a.url), openStream(t, m.at(b.url), b.url)
	untouched := openStream(t, other, b.url)
	select {
	case <-onA:
		t.Fatal("the stream ended before the revocation")
	case <-time.After(200 * time.Millisecond):
	}
	var id uuid.UUID
	if err := a.pool.QueryRow(t.Context(), `SELECT id FROM api_tokens WHERE kind = 'agent' ORDER BY created_at LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := a.auth.RevokeToken(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for name, ended := range map[string]<-chan struct{}{"the revoking instance": onA, "the other instance": onB} {
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the revoked token's stream is still open after 5 s", name)
		}
	}
	select {
	case <-untouched:
		t.Error("another token's stream ended too")
	case <-time.After(200 * time.Millisecond):
	}
}
