// Package replaytest records real calls for the policy replay's tests: an
// MCP upstream "up" declared in the registry as the server declares it
// (its tools' definitions pinned and accepted), and calls proposed through
// the real proposals service.
package replaytest

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/conversations"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// The fixture's upstream tools, as it lists them: fetch says it only
// reads; write says it changes something local and idempotently, but not
// whether it is read-only (a missing hint is no claim, so a file may
// declare it a read).
var upstreamTools = []tools.UpstreamTool{
	{Upstream: "up", Name: "fetch", Description: "Fetch a page.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: tools.Annotations{ReadOnly: ptr(true), OpenWorld: ptr(false)}},
	{Upstream: "up", Name: "write", Description: "Write a note.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: tools.Annotations{Destructive: ptr(false), Idempotent: ptr(true), OpenWorld: ptr(false)}},
}

func ptr(b bool) *bool { return &b }

// LiveFile is the policy file the calls were recorded under: the upstream,
// no overrides.
const LiveFile = `upstreams:
  - name: up
    url: http://127.0.0.1:9/mcp
`

// TightenFile makes up.fetch a change: its reads would ask the owner.
const TightenFile = `upstreams:
  - name: up
    url: http://127.0.0.1:9/mcp
    tools:
      fetch:
        effect: mutate
`

// LoosenFile declares up.write a read: its changes would run at once.
const LoosenFile = `upstreams:
  - name: up
    url: http://127.0.0.1:9/mcp
    tools:
      write:
        effect: read
`

// forwarder answers every forwarded call at once.
type forwarder struct{}

func (forwarder) Accepted(string, string, string) bool { return true }

func (forwarder) Forward(context.Context, string, string, string, json.RawMessage, bool) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`), nil
}

// MustRegistry is the built-in tools and the upstream's, declared from
// LiveFile as the server declares them.
func MustRegistry(tb testing.TB) *tools.Registry {
	tb.Helper()
	return MustRegistryFor(tb, LiveFile)
}

// MustRegistryFor is the built-in tools and the upstream's, declared from
// the policy file text as the server declares them.
func MustRegistryFor(tb testing.TB, text string) *tools.Registry {
	tb.Helper()
	registry, err := tools.Builtin()
	if err != nil {
		tb.Fatal(err)
	}
	file, err := tools.ParsePolicyFile([]byte(text), registry.Classes(), func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	var decls []tools.Tool
	for _, u := range upstreamTools {
		d, err := tools.DeclareUpstream(file.Upstreams[0], u, forwarder{})
		if err != nil {
			tb.Fatal(err)
		}
		decls = append(decls, d)
	}
	if err := registry.ReplaceUpstream("up", decls); err != nil {
		tb.Fatal(err)
	}
	return registry
}

// MustPin pins the upstream's definitions, accepted, as the server does
// when the file's accept list names them.
func MustPin(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	q := db.New(pool)
	for _, u := range upstreamTools {
		def, err := u.Definition()
		if err != nil {
			tb.Fatal(err)
		}
		hash, err := u.DefinitionHash()
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := q.InsertUpstreamTool(context.Background(), db.InsertUpstreamToolParams{Upstream: u.Upstream, Name: u.Name,
			DefinitionHash: hash, Definition: def, Accept: true}); err != nil {
			tb.Fatal(err)
		}
	}
}

// MustMember adds a member to the default workspace and returns it.
func MustMember(tb testing.TB, pool *pgxpool.Pool, email string) uuid.UUID {
	tb.Helper()
	ctx := context.Background()
	a := auth.NewService(pool, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	ws, err := a.EnsureDefaultWorkspace(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := a.CreateUser(ctx, ws, email, "a long enough password", auth.RoleMember); err != nil {
		tb.Fatal(err)
	}
	return ws
}

// Recorded are the calls Record made, by tool, in the order proposed.
type Recorded struct {
	Fetch, Write, Search []uuid.UUID
	// Rejected is the write the owner rejected.
	Rejected uuid.UUID
}

// All is every call recorded.
func (r Recorded) All() []uuid.UUID {
	return append(append(append([]uuid.UUID{}, r.Fetch...), r.Write...), r.Search...)
}

// MustRecord has the agent of email (an existing user) propose ten calls
// in a new conversation in approve mode, through the real service: four
// up.fetch (read: they run at once), three up.write (changes: they wait
// for the owner, who rejects the first) and three records.search (a
// built-in read the files do not cover).
func MustRecord(tb testing.TB, pool *pgxpool.Pool, registry *tools.Registry, email string) Recorded {
	tb.Helper()
	return record(tb, pool, registry, email, true)
}

// MustEnforce proposes the same ten calls, in the same order, under
// registry (one declared from a candidate file), whatever it decides; no
// one resolves them.
func MustEnforce(tb testing.TB, pool *pgxpool.Pool, registry *tools.Registry, email string) Recorded {
	tb.Helper()
	return record(tb, pool, registry, email, false)
}

func record(tb testing.TB, pool *pgxpool.Pool, registry *tools.Registry, email string, live bool) Recorded {
	tb.Helper()
	ctx := context.Background()
	a := auth.NewService(pool, auth.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	principal := func(kind auth.TokenKind) auth.Principal {
		tok, err := a.CreateToken(ctx, email, kind, "replay fixture")
		if err != nil {
			tb.Fatal(err)
		}
		p, err := a.AuthenticateToken(ctx, tok)
		if err != nil {
			tb.Fatal(err)
		}
		return p
	}
	owner, agent := principal(auth.TokenUser), principal(auth.TokenAgent)
	conv, err := conversations.NewService(pool).Create(ctx, owner, "replay fixture")
	if err != nil {
		tb.Fatal(err)
	}
	svc := proposals.NewService(pool, registry, slog.New(slog.DiscardHandler))
	scope := proposals.InConversation(conv.ID)
	propose := func(tool, args, want string) uuid.UUID {
		if !live {
			want = ""
		}
		p, err := svc.Propose(ctx, agent, scope, proposals.Input{Tool: tool, Arguments: json.RawMessage(args),
			Rationale: "because the user asked for it", IdempotencyKey: "replay-" + strings.ReplaceAll(uuid.NewString(), "-", "")})
		if err != nil {
			tb.Fatalf("propose %s: %v", tool, err)
		}
		if want != "" && string(p.State()) != want {
			tb.Fatalf("%s was decided %s, want %s", tool, p.State(), want)
		}
		return p.ID
	}
	var r Recorded
	for i := range 4 {
		r.Fetch = append(r.Fetch, propose("up.fetch", `{"page": `+string(rune('0'+i))+`}`, "allowed"))
	}
	for i := range 3 {
		r.Write = append(r.Write, propose("up.write", `{"note": `+string(rune('0'+i))+`}`, "review_required"))
	}
	for range 3 {
		r.Search = append(r.Search, propose("records.search", `{"query": "a"}`, "allowed"))
	}
	if live {
		if _, err := svc.Reject(ctx, owner, r.Write[0], "not this note"); err != nil {
			tb.Fatal(err)
		}
		r.Rejected = r.Write[0]
	}
	return r
}
