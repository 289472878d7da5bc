package mcp

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gatehouse/gatehouse/internal/clip"

	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/canonjson"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// MCP's 2026-07-28 revision is stateless: no initialize and no
// Mcp-Session-Id; each request carries the client's identity and
// capabilities in its _meta (server/discover replaces initialize), and a
// server that needs the client's input answers an input-required result
// whose requestState the client sends back with its retry. Gatehouse
// serves it beside 2025-11-25 (which today's clients speak, with
// sessions): a request without a session id whose MCP-Protocol-Version is
// 2026-07-28 or later goes to the SDK's stateless handler, with a server
// built for that request alone.
//
// Where a stateless client's calls are proposed: the scope it names
// (Gatehouse-Conversation or Gatehouse-Notebook, or its OAuth grant's),
// or else one conversation per token and client name ("MCP: <client>"),
// planned by the first request that needs it and created by its first
// tool call (mcp_sessions, id "stateless-…").
//
// A call that waits for a person (a confirm card, an approval packet)
// answers input-required: a URL-mode elicitation pointing at the card or
// packet, and a requestState sealed with XChaCha20-Poly1305 over the
// principal (token and user), the tool, the digest of the exact arguments
// (JCS, SHA-256), the tool's definition as the client was shown it, the
// proposal's id and an expiry. The retry, with that state, answers the
// outcome once decided, or input-required again (a new state) while it
// waits. A state is single use: its nonce is recorded when it is used.

// protocolStateless is the first revision without sessions.
const protocolStateless = "2026-07-28"

// stateless reports whether a request speaks the stateless revision: no
// session, and a protocol version header of 2026-07-28 or later (dates
// compare as strings).
func stateless(r *http.Request) bool {
	return r.Header.Get(sessionIDHeader) == "" && r.Header.Get("Mcp-Protocol-Version") >= protocolStateless
}

// statelessBindingID is the mcp_sessions id of a token's binding for a
// client name.
func statelessBindingID(tokenID uuid.UUID, client string) string {
	sum := sha256.Sum256(append(tokenID[:], client...))
	return "stateless-" + hex.EncodeToString(sum[:20])
}

// bindings caches stateless bindings (they never change once made), up to
// maxBindings entries.
type bindings struct {
	mu sync.Mutex
	m  map[string]uuid.UUID
}

const maxBindings = 10_000

// statelessConversation is the conversation a stateless client's calls
// are proposed in when it names no scope: its token's for its client name.
func (g *Gateway) statelessConversation(ctx context.Context, p auth.Principal, client string) (uuid.UUID, error) {
	id := statelessBindingID(p.TokenID, client)
	g.bindings.mu.Lock()
	conv, ok := g.bindings.m[id]
	g.bindings.mu.Unlock()
	if ok {
		return conv, nil
	}
	if g.opts.Queries == nil {
		return uuid.Nil, errors.New("mcp: stateless clients need the database")
	}
	conv, err := g.opts.Queries.StatelessMCPBinding(ctx, db.StatelessMCPBindingParams{WorkspaceID: p.WorkspaceID, ID: id, TokenID: p.TokenID,
		OwnerID: p.UserID, ConversationID: uuid.NullUUID{UUID: uuid.New(), Valid: true}, ClientName: clip.Runes(client, 200), ProtocolVersion: protocolStateless})
	if err != nil {
		return uuid.Nil, fmt.Errorf("mcp: a stateless client's conversation: %w", err)
	}
	g.bindings.mu.Lock()
	if len(g.bindings.m) >= maxBindings {
		g.bindings.m = map[string]uuid.UUID{}
	}
	g.bindings.m[id] = conv
	g.bindings.mu.Unlock()
	return conv, nil
}

// requestState is what a sealed requestState carries.
type requestState struct {
	TokenID    uuid.UUID `json:"t"`
	UserID     uuid.UUID `json:"u"`
	Tool       string    `json:"n"`
	Arguments  []byte    `json:"a"` // SHA-256 of the arguments' JCS form
	Definition []byte    `json:"d"` // SHA-256 of the tool's definition as listed
	ProposalID uuid.UUID `json:"p"`
	Expires    int64     `json:"e"` // Unix seconds
}

// stateLifetime is how long a requestState may be sent back.
const stateLifetime = 24 * time.Hour

// stateVersion prefixes a sealed state (and is its additional data).
var stateVersion = []byte("gh1")

// stateAEAD is the cipher of requestStates: its key derived from the
// deployment's cursor key (cursor_keys).
func (g *Gateway) stateAEAD(ctx context.Context) (cipherAEAD, error) {
	key, err := g.cursorKey.Get(ctx)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("gatehouse mcp requestState v1"))
	return chacha20poly1305.NewX(m.Sum(nil))
}

type cipherAEAD interface {
	NonceSize() int
	Seal(dst, nonce, plaintext, additionalData []byte) []byte
	Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
}

// seal makes a requestState: base64url(version | nonce | ciphertext).
func (g *Gateway) seal(ctx context.Context, st requestState) (string, error) {
	aead, err := g.stateAEAD(ctx)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := append(append(bytes.Clone(stateVersion), nonce...), aead.Seal(nil, nonce, plain, stateVersion)...)
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// errBadState is any requestState that is not one Gatehouse sealed, or
// was altered.
var errBadState = errors.New("the requestState is not one Gatehouse gave, or was altered")

// open reads a requestState sealed by seal, and its nonce.
func (g *Gateway) open(ctx context.Context, s string) (requestState, []byte, error) {
	aead, err := g.stateAEAD(ctx)
	if err != nil {
		return requestState{}, nil, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	n := len(stateVersion) + aead.NonceSize()
	if err != nil || len(s) > 4096 || len(raw) < n || !bytes.Equal(raw[:len(stateVersion)], stateVersion) {
		return requestState{}, nil, errBadState
	}
	nonce := raw[len(stateVersion):n]
	plain, err := aead.Open(nil, nonce, raw[n:], stateVersion)
	if err != nil {
		return requestState{}, nil, errBadState
	}
	var st requestState
	if err := json.Unmarshal(plain, &st); err != nil {
		return requestState{}, nil, errBadState
	}
	return st, nonce, nil
}

// argumentsDigest is the SHA-256 of the arguments' JCS form (Gatehouse's
// own, rationale and idempotency key, taken out).
func argumentsDigest(args json.RawMessage) ([]byte, error) {
	c, err := canonjson.Transform(args)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c)
	return sum[:], nil
}

// definitionDigest is the SHA-256 of the tool's definition as this
// session lists it.
func (s *session) definitionDigest(tool string) []byte {
	s.mu.Lock()
	def := s.shown[tool]
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(def))
	return sum[:]
}

// waiting reports whether a tool result is a call that waits for a person,
// and its proposal id and the page where the person decides.
func waiting(res *sdk.CallToolResult) (id uuid.UUID, url, status string, ok bool) {
	data, _ := res.StructuredContent.(map[string]any)
	status, _ = data["status"].(string)
	if res.IsError || (status != proposals.StatusPending && status != proposals.StatusPendingApproval) {
		return uuid.Nil, "", "", false
	}
	id, err := uuid.Parse(fmt.Sprint(data["proposal_id"]))
	if err != nil {
		return uuid.Nil, "", "", false
	}
	url, _ = data["confirm_url"].(string)
	if u, has := data["approval_url"].(string); has {
		url = u
	}
	return id, url, status, url != ""
}

// inputRequired turns a waiting call's result into the input-required
// result of the stateless revision: a URL elicitation (the card or
// packet, where a person decides) and a sealed requestState for the retry.
func (s *session) inputRequired(ctx context.Context, p auth.Principal, tool string, argsDigest []byte, res *sdk.CallToolResult) (*sdk.CallToolResult, error) {
	id, url, status, ok := waiting(res)
	if !ok {
		return res, nil
	}
	st := requestState{TokenID: p.TokenID, UserID: p.UserID, Tool: tool, Arguments: argsDigest, Definition: s.definitionDigest(tool),
		ProposalID: id, Expires: time.Now().Add(stateLifetime).Unix()}
	sealed, err := s.g.seal(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("mcp: seal a requestState: %w", err)
	}
	who := "its owner confirms it"
	if status == proposals.StatusPendingApproval {
		who = "an approver decides it"
	}
	text := ""
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			text = t.Text
		}
	}
	return &sdk.CallToolResult{
		Meta: sdk.Meta{"gatehouse/proposal_id": id.String(), "gatehouse/status": status},
		InputRequests: sdk.InputRequestMap{"gatehouse/decision": &sdk.ElicitParams{
			Mode: "url", URL: url, ElicitationID: id.String(),
			Message: fmt.Sprintf("The call waits until %s at %s. %s", who, url, text),
		}},
		RequestState: sealed,
	}, nil
}

// retry answers the retry of a call that waited (its requestState sent
// back): the outcome once decided, or input-required again while it
// waits. A state that is not Gatehouse's, altered, expired, used before,
// or sent by another token or for other arguments or another definition
// of the tool, does nothing and says why.
func (s *session) retry(ctx context.Context, p auth.Principal, tool string, argsDigest []byte, sealed string) (*sdk.CallToolResult, error) {
	st, nonce, err := s.g.open(ctx, sealed)
	refuse := func(why string) (*sdk.CallToolResult, error) {
		return toolError("The retry was not accepted: "+why+". Make the call again without a requestState.",
			map[string]any{"code": "invalid_request_state", "message": why}), nil
	}
	switch {
	case errors.Is(err, errBadState):
		return refuse(err.Error())
	case err != nil:
		return nil, err
	case st.TokenID != p.TokenID || st.UserID != p.UserID:
		return refuse("the requestState was given to another caller")
	case st.Tool != tool || !bytes.Equal(st.Arguments, argsDigest):
		return refuse("the requestState was given for another call (tool or arguments)")
	case !bytes.Equal(st.Definition, s.definitionDigest(tool)):
		return refuse("the tool's definition changed since the requestState was given")
	case time.Now().Unix() > st.Expires:
		return refuse("the requestState expired")
	}
	if q := s.g.opts.Queries; q != nil {
		n, err := q.UseMCPRequestState(ctx, db.UseMCPRequestStateParams{WorkspaceID: p.WorkspaceID, Nonce: nonce, ExpiresAt: time.Unix(st.Expires, 0)})
		if err != nil {
			return nil, fmt.Errorf("mcp: use a requestState: %w", err)
		}
		if n == 0 {
			return refuse("the requestState was used before; send the latest one")
		}
	}
	prop, err := s.g.props.Get(ctx, p, st.ProposalID)
	if err != nil {
		return s.refused(err), nil
	}
	return s.inputRequired(ctx, p, tool, argsDigest, s.outcome(prop))
}
