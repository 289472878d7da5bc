package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/audit"
	"github.com/gatehouse/gatehouse/internal/auth"
	"github.com/gatehouse/gatehouse/internal/receipts"
	"github.com/gatehouse/gatehouse/internal/tools"
)

// Upstreams are the MCP servers behind the gate, from the policy file:
// their clients, their tools as last listed (the live definitions), and
// the pins (upstream_tools) that hold a tool whose definition changed
// until an admin accepts it.
//
// The live definitions are listed at start, on an admin's refresh, when an
// upstream says its tools changed (notifications/tools/list_changed) and
// when a lost connection is opened again. A call runs only while its
// tool's live definition is its pin. Pins live in the database, and every
// change to one is announced to every instance (a trigger on
// upstream_tools, migration 57): a call is checked against the pin as this
// instance last read it, read again when it hears of a change, when its
// read is older than pinFresh, and whenever it is not listening. So an
// acceptance or a hold on one instance counts on all at once, and a call
// costs no read of its pin.
type Upstreams struct {
	pool     *pgxpool.Pool
	q        *db.Queries
	registry *tools.Registry
	log      *slog.Logger
	// ws is the workspace whose audit log records what Gatehouse itself
	// does with upstreams (a tool seen, held, accepted by the file).
	ws      uuid.UUID
	version string
	// cfgMu guards list and byName, which a reload of the policy file
	// replaces (Reconfigure); reconfMu serialises the reloads.
	cfgMu    sync.RWMutex
	list     []*upstream
	byName   map[string]*upstream
	reconfMu sync.Mutex
	// retired are upstreams a reload replaced or removed, whose sessions
	// close once the calls on them have had their time (Close closes them
	// at once).
	retired []*upstream
	// progress routes an upstream's notifications/progress to the agent's
	// request it belongs to: Forward's token → the request's sink.
	progress sync.Map

	mu   sync.RWMutex
	pins map[string]pin // "<upstream>/<tool>" → the accepted definition, as last read
	// rows are the pins' rows as checkPin last read them; gen counts the
	// times they were all forgotten, so that a read that raced a change
	// is not kept.
	rows map[string]pinRead
	gen  uint64
	// listening: this instance hears the events channel, where every
	// change to a pin is announced (SetListening).
	listening atomic.Bool
	// fresh is how long a pin read is trusted while listening (pinFresh).
	fresh time.Duration
	// outputs are the output schemas of the declared upstream tools, by
	// declared name, from the definitions they are declared by.
	outputs map[string]json.RawMessage

	// bg ends with Close: it bounds the listings that notifications start.
	bg      context.Context
	stop    context.CancelFunc
	bgMu    sync.Mutex
	closed  bool
	relists sync.WaitGroup
}

// PinsChangedEvent is the event (on the events channel every instance
// LISTENs on) that a pin changed (a definition seen, held, accepted; the
// trigger of migration 57 sends it): each instance re-reads the pins
// (ReloadPins) and shows its open MCP sessions the change
// (notifications/tools/list_changed).
const PinsChangedEvent = "upstreams:pins"

// pinFresh is how long checkPin trusts a pin it read while this instance
// listens for changes: the bound on a change whose announcement was lost.
const pinFresh = time.Second

// SetPinFresh sets how long a pin read is trusted while this instance
// listens for changes (pinFresh by default; 0: every check reads it).
func (u *Upstreams) SetPinFresh(d time.Duration) {
	u.mu.Lock()
	u.fresh = d
	u.mu.Unlock()
}

// pinRead is a pin's row as checkPin read it (found false: there was none).
type pinRead struct {
	row   db.UpstreamTool
	found bool
	at    time.Time
}

// SetListening says whether this instance hears the events channel now
// (web's listener: true once it LISTENs, false when its connection is
// lost). While it does not, every check reads its pin; when it starts
// again, the pins read before are forgotten (changes may have gone
// unheard meanwhile).
func (u *Upstreams) SetListening(on bool) {
	if u == nil {
		return
	}
	u.listening.Store(on)
	u.forgetRows()
}

// forgetRows drops the pins' rows checkPin read: the next check of each
// reads it again.
func (u *Upstreams) forgetRows() {
	u.mu.Lock()
	u.forgetRowsLocked()
	u.mu.Unlock()
}

// forgetRowsLocked is forgetRows with u.mu held.
func (u *Upstreams) forgetRowsLocked() {
	u.gen++
	clear(u.rows)
}

// pinRow is the tool's pin: as read less than pinFresh ago while
// listening, else read now.
func (u *Upstreams) pinRow(ctx context.Context, upstream, tool string) (db.UpstreamTool, bool, error) {
	k := key(upstream, tool)
	u.mu.RLock()
	r, ok := u.rows[k]
	gen, fresh := u.gen, u.fresh
	u.mu.RUnlock()
	if ok && u.listening.Load() && time.Since(r.at) < fresh {
		return r.row, r.found, nil
	}
	at := time.Now()
	row, err := u.q.GetUpstreamTool(ctx, db.GetUpstreamToolParams{Upstream: upstream, Name: tool})
	found := true
	if errors.Is(err, pgx.ErrNoRows) {
		found, err = false, nil
	}
	if err != nil {
		return db.UpstreamTool{}, false, err
	}
	u.mu.Lock()
	if u.gen == gen {
		u.rows[k] = pinRead{row: row, found: found, at: at}
	}
	u.mu.Unlock()
	return row, found, nil
}

// ReloadPins re-reads every pin and declares again the upstreams whose
// pins changed since this instance last read them (another instance saw a
// new definition, or its admin accepted one).
func (u *Upstreams) ReloadPins(ctx context.Context) error {
	if u == nil {
		return nil
	}
	u.forgetRows()
	rows, err := u.q.ListUpstreamTools(ctx)
	if err != nil {
		return fmt.Errorf("mcp: reload pins: %w", err)
	}
	changed := map[string]bool{}
	u.mu.Lock()
	for _, r := range rows {
		k, p := key(r.Upstream, r.Name), pinOf(r)
		if u.pins[k].hash != p.hash {
			u.pins[k] = p
			changed[r.Upstream] = true
		}
	}
	u.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(changed)) {
		if up, ok := u.named(name); ok {
			if err := u.declare(up); err != nil {
				return err
			}
		}
	}
	return nil
}

// pin is a tool's accepted definition and its hash ("" when no admin has
// accepted one).
type pin struct {
	hash string
	def  json.RawMessage
}

func pinOf(row db.UpstreamTool) pin {
	if !row.AcceptedHash.Valid {
		return pin{}
	}
	return pin{hash: row.AcceptedHash.String, def: row.AcceptedDefinition}
}

// upstream is one server: its client session and its last listing. Its
// configuration never changes: a reload that changes it replaces the
// upstream with a new one (Reconfigure) and retires this one.
type upstream struct {
	cfg tools.UpstreamConfig
	// retired is set (with declMu held) once a reload replaced or removed
	// the upstream: it declares nothing any more, lists nothing, and
	// opens no new session; calls already on its session finish.
	retired atomic.Bool

	connMu sync.Mutex
	sess   *sdk.ClientSession
	// transport carries the upstream's HTTP requests (a URL's), made with
	// its first session and kept through reconnections: see
	// upstreamTransport.
	transport *http.Transport

	// listMu serialises the listings of this upstream, and declMu its
	// declarations in the registry, so an older one never replaces a newer.
	listMu sync.Mutex
	declMu sync.Mutex

	mu       sync.Mutex
	listedAt time.Time
	err      string
	listed   map[string]listedTool // live: by the upstream's tool name
	// changes counts what may have changed the upstream's tools since
	// Gatehouse began (a list_changed notification, a new connection, whose
	// reason is staleBy); listedAs is the count the last listing saw. They
	// differ while the live definitions may be stale.
	changes, listedAs uint64
	staleBy           string
	// relisting: a listing that a notification asked for runs.
	relisting bool
}

// changed notes that the upstream's tools may have changed.
func (up *upstream) changed(why string) {
	up.mu.Lock()
	up.changes++
	up.staleBy = why
	up.mu.Unlock()
}

// stale reports whether the live definitions may be out of date, and why.
func (up *upstream) stale() (bool, string) {
	up.mu.Lock()
	defer up.mu.Unlock()
	return up.changes != up.listedAs, up.staleBy
}

// listedTool is a tool as last listed, and why it is not declared if it
// is not.
type listedTool struct {
	def     tools.UpstreamTool
	hash    string
	problem string
	// declProblem says why the registry refused its declaration.
	declProblem string
}

// why is why the tool is unavailable ("" when it is not).
func (lt listedTool) why() string {
	if lt.problem != "" {
		return lt.problem
	}
	return lt.declProblem
}

// NewUpstreams prepares the upstreams of the policy file; nothing is
// contacted until Refresh. An upstream whose name is the prefix of a
// built-in tool (records, email…) is refused: its tools would read as
// built-ins.
func NewUpstreams(pool *pgxpool.Pool, registry *tools.Registry, file *tools.PolicyFile, workspaceID uuid.UUID, log *slog.Logger, version string) (*Upstreams, error) {
	if version == "" {
		version = "dev"
	}
	u := &Upstreams{pool: pool, q: db.New(pool), registry: registry, log: log, ws: workspaceID, version: version,
		byName: map[string]*upstream{}, pins: map[string]pin{}, rows: map[string]pinRead{}, fresh: pinFresh, outputs: map[string]json.RawMessage{}}
	u.bg, u.stop = context.WithCancel(context.Background())
	if file == nil {
		return u, nil
	}
	for _, t := range registry.List() {
		prefix, _, _ := strings.Cut(t.Name, ".")
		for _, cfg := range file.Upstreams {
			if cfg.Name == prefix && t.Upstream == "" {
				return nil, fmt.Errorf("policy file: line %d: upstream %q would share its name with the built-in tool %s", cfg.Line, cfg.Name, t.Name)
			}
		}
	}
	for _, cfg := range file.Upstreams {
		up := &upstream{cfg: cfg, listed: map[string]listedTool{}}
		u.list = append(u.list, up)
		u.byName[cfg.Name] = up
	}
	return u, nil
}

// Close ends every upstream session (and stdio servers' processes), once
// the listings that notifications started have stopped.
func (u *Upstreams) Close() {
	if u == nil {
		return
	}
	u.bgMu.Lock()
	u.closed = true
	u.bgMu.Unlock()
	u.stop()
	u.relists.Wait()
	u.bgMu.Lock()
	retired := u.retired
	u.bgMu.Unlock()
	for _, up := range append(u.all(), retired...) {
		up.closeSession()
	}
}

// closeSession ends the upstream's session, if it has one.
func (up *upstream) closeSession() {
	up.connMu.Lock()
	defer up.connMu.Unlock()
	if up.sess != nil {
		up.sess.Close()
		up.sess = nil
	}
	if up.transport != nil {
		up.transport.CloseIdleConnections()
	}
}

// named is the upstream of that name in force.
func (u *Upstreams) named(name string) (*upstream, bool) {
	u.cfgMu.RLock()
	defer u.cfgMu.RUnlock()
	up, ok := u.byName[name]
	return up, ok
}

// all are the upstreams in force, in the file's order.
func (u *Upstreams) all() []*upstream {
	u.cfgMu.RLock()
	defer u.cfgMu.RUnlock()
	return slices.Clone(u.list)
}

// upstreamIdleConns is how many idle connections to one upstream are kept
// for the next calls: room for as many calls in flight to it at once as
// its agents make, beside the standalone stream (a call holds no database
// connection while it is forwarded, so the pool does not bound them).
const upstreamIdleConns = 64

// upstreamTransport is an upstream's HTTP transport: the default one's
// settings (proxies from the environment, timeouts, HTTP/2), but keeping
// up to upstreamIdleConns idle connections instead of the default two.
// With two, every call beyond the second in flight opened a new
// connection (and, over https, a TLS handshake) and closed it after: at
// 8 clients a quarter of the calls did, 190 connections a second left in
// TIME_WAIT (docs/performance.md).
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = upstreamIdleConns
	t.MaxIdleConns = upstreamIdleConns
	return t
}

// headerTransport sends an upstream's configured headers with every
// request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// session is the upstream's client session, connected on first use. A
// new connection counts as a change of the tools: notifications sent while
// there was none were missed.
//
// The client listens for the upstream's notifications/tools/list_changed
// (over the standalone SSE stream of Streamable HTTP, or stdio) and lists
// the upstream's tools again when one comes. A session that ends is
// forgotten, so the next call connects again and lists again first.
func (u *Upstreams) session(ctx context.Context, up *upstream) (*sdk.ClientSession, error) {
	up.connMu.Lock()
	defer up.connMu.Unlock()
	if up.sess != nil {
		return up.sess, nil
	}
	if up.retired.Load() {
		// A reload replaced it: its calls go to the upstream in force.
		return nil, errors.New("the upstream was reconfigured by a reload of the policy file")
	}
	var t sdk.Transport
	if up.cfg.URL != "" {
		if up.transport == nil {
			up.transport = upstreamTransport()
		}
		t = &sdk.StreamableClientTransport{Endpoint: up.cfg.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: headerTransport{headers: up.cfg.Headers, base: up.transport}}}
	} else {
		t = &sdk.CommandTransport{Command: exec.Command(up.cfg.Command[0], up.cfg.Command[1:]...)}
	}
	cctx, cancel := context.WithTimeout(ctx, up.cfg.Timeout)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "gatehouse", Version: u.version}, &sdk.ClientOptions{
		Logger: u.log,
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			up.changed("list_changed")
			u.relistSoon(up)
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if tok, ok := req.Params.ProgressToken.(string); ok {
				if sink, ok := u.progress.Load(tok); ok {
					sink.(Progress)(req.Params.Progress, req.Params.Total, req.Params.Message)
				}
			}
		},
	})
	s, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, err
	}
	up.sess = s
	up.changed("reconnect")
	go func() {
		s.Wait()
		u.drop(up, s)
	}()
	return s, nil
}

// relistSoon lists the upstream's tools again, in the background, because
// it said they changed; notifications that come while it lists make one
// more listing, not one each. A listing that fails stops it: the next call
// lists first (catchUp).
func (u *Upstreams) relistSoon(up *upstream) {
	u.bgMu.Lock()
	defer u.bgMu.Unlock()
	if u.closed || up.retired.Load() {
		return
	}
	up.mu.Lock()
	if up.relisting {
		up.mu.Unlock()
		return
	}
	up.relisting = true
	up.mu.Unlock()
	u.relists.Add(1)
	go func() {
		defer u.relists.Done()
		for {
			up.mu.Lock()
			if up.changes == up.listedAs || u.bg.Err() != nil || up.retired.Load() {
				up.relisting = false
				up.mu.Unlock()
				return
			}
			up.mu.Unlock()
			if _, err := u.catchUp(u.bg, up); err != nil {
				if u.bg.Err() == nil {
					u.log.Warn("upstream unavailable", "upstream", up.cfg.Name, "endpoint", up.cfg.Endpoint(), "err", err)
				}
				up.mu.Lock()
				up.err, up.relisting = safeCause(err), false
				up.mu.Unlock()
				return
			}
		}
	}()
}

// catchUp lists the upstream's tools again if they may have changed since
// the last listing (a notification, a new connection), and reports
// whether it did.
func (u *Upstreams) catchUp(ctx context.Context, up *upstream) (bool, error) {
	if _, err := u.session(ctx, up); err != nil {
		return false, err
	}
	if stale, _ := up.stale(); !stale {
		return false, nil // the common case: no wait for a listing that runs
	}
	up.listMu.Lock()
	defer up.listMu.Unlock()
	stale, why := up.stale()
	if !stale {
		return false, nil // a listing that ran meanwhile caught up
	}
	return true, u.listTools(ctx, up, why)
}

// drop forgets a session that failed, so the next call reconnects.
func (u *Upstreams) drop(up *upstream, s *sdk.ClientSession) {
	up.connMu.Lock()
	defer up.connMu.Unlock()
	if up.sess == s {
		up.sess = nil
		go s.Close()
	}
}

// Refresh lists every upstream's tools, pins what it finds (a changed
// definition holds its tool) and declares the tools in the registry. An
// unreachable upstream keeps the tools it had and says why it is
// unavailable; it is no error.
func (u *Upstreams) Refresh(ctx context.Context) {
	if u == nil {
		return
	}
	var wg sync.WaitGroup
	for _, up := range u.all() {
		wg.Go(func() {
			if err := u.refresh(ctx, up, "start"); err != nil {
				u.log.Warn("upstream unavailable", "upstream", up.cfg.Name, "endpoint", up.cfg.Endpoint(), "err", err)
				up.mu.Lock()
				up.err = safeCause(err)
				up.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// RefreshOne refreshes one upstream by name (an admin's refresh).
func (u *Upstreams) RefreshOne(ctx context.Context, name string) error {
	if u == nil {
		return apperr.Errorf(apperr.ENOTFOUND, "No upstream is configured.")
	}
	up, ok := u.named(name)
	if !ok {
		return apperr.Errorf(apperr.ENOTFOUND, "No upstream is named %q.", name)
	}
	if err := u.refresh(ctx, up, "refresh"); err != nil {
		up.mu.Lock()
		up.err = safeCause(err)
		up.mu.Unlock()
		return apperr.Errorf(apperr.ECONFLICT, "The upstream %s could not be listed: %s.", name, safeCause(err))
	}
	return nil
}

// refresh lists the upstream's tools (trigger says why: start, refresh,
// list_changed or reconnect), re-hashes each definition and pins it (a
// definition that is not the accepted one holds its tool, audited), then
// declares the tools in the registry.
func (u *Upstreams) refresh(ctx context.Context, up *upstream, trigger string) error {
	up.listMu.Lock()
	defer up.listMu.Unlock()
	return u.listTools(ctx, up, trigger)
}

// listTools is refresh with listMu held.
func (u *Upstreams) listTools(ctx context.Context, up *upstream, trigger string) error {
	lctx, cancel := context.WithTimeout(ctx, up.cfg.Timeout)
	defer cancel()
	s, err := u.session(lctx, up)
	if err != nil {
		return err
	}
	// What this listing catches up with: every change noted before it asks.
	up.mu.Lock()
	as := up.changes
	up.mu.Unlock()
	var listed []*sdk.Tool
	for t, err := range s.Tools(lctx, nil) {
		if err != nil {
			u.drop(up, s)
			return err
		}
		listed = append(listed, t)
	}
	found := map[string]listedTool{}
	tx, err := u.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("mcp: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := u.q.WithTx(tx)
	pins := map[string]pin{}
	for _, t := range listed {
		lt := u.examine(up.cfg, t)
		found[t.Name] = lt
		if lt.problem != "" {
			continue
		}
		def, err := lt.def.Definition()
		if err != nil {
			return err
		}
		row, err := u.pin(ctx, q, up.cfg, lt, def, trigger)
		if err != nil {
			return err
		}
		pins[key(up.cfg.Name, t.Name)] = pinOf(row)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("mcp: commit pins: %w", err)
	}
	u.mu.Lock()
	for k, p := range pins {
		u.pins[k] = p
	}
	u.forgetRowsLocked()
	u.mu.Unlock()
	up.mu.Lock()
	up.listed, up.listedAt, up.err, up.listedAs = found, time.Now(), "", as
	up.mu.Unlock()
	return u.declare(up)
}

// declare puts the upstream's tools in the registry as agents may see
// them: a tool whose live definition is its pin as it is listed; a held
// tool as it was pinned (its name, description, input schema and
// annotations as accepted), so a changed description never reaches an
// agent before an admin accepts it; a tool no admin ever accepted not at
// all. It makes no call to the upstream.
func (u *Upstreams) declare(up *upstream) error {
	up.declMu.Lock()
	defer up.declMu.Unlock()
	if up.retired.Load() {
		return nil // a reload replaced it: the upstream in force declares
	}
	decls, outputs := u.declarations(up)
	// The output schemas go with the declarations they were made from,
	// in place before the registry tells the sessions of the change.
	u.mu.Lock()
	u.setOutputs(up.cfg.Name, outputs)
	u.mu.Unlock()
	return u.registry.ReplaceUpstream(up.cfg.Name, decls)
}

// setOutputs makes outputs the output schemas of the upstream's tools,
// with u.mu held.
func (u *Upstreams) setOutputs(upstream string, outputs map[string]json.RawMessage) {
	for name := range u.outputs {
		if strings.HasPrefix(name, upstream+".") {
			delete(u.outputs, name)
		}
	}
	maps.Copy(u.outputs, outputs)
}

// declarations are the upstream's tools as declare puts them in the
// registry, and their output schemas, with up.declMu held.
func (u *Upstreams) declarations(up *upstream) ([]tools.Tool, map[string]json.RawMessage) {
	u.mu.RLock()
	pins := map[string]pin{}
	for k, p := range u.pins {
		pins[k] = p
	}
	u.mu.RUnlock()
	up.mu.Lock()
	defer up.mu.Unlock()
	names := slices.Sorted(maps.Keys(up.listed))
	var decls []tools.Tool
	outputs := map[string]json.RawMessage{}
	for _, name := range names {
		lt := up.listed[name]
		lt.declProblem = ""
		if lt.problem != "" {
			up.listed[name] = lt
			continue
		}
		p := pins[key(up.cfg.Name, name)]
		def := lt.def
		switch {
		case p.hash == "":
			up.listed[name] = lt
			continue // never accepted: nothing of it is offered
		case p.hash != lt.hash:
			pinned, err := tools.UpstreamToolFromDefinition(up.cfg.Name, p.hash, p.def)
			if err != nil {
				lt.declProblem = "its pinned definition cannot be read back"
				up.listed[name] = lt
				continue
			}
			def = pinned
		}
		decl, err := tools.DeclareUpstream(up.cfg, def, u)
		if err == nil {
			err = u.registry.Check(decl)
		}
		if err != nil {
			lt.declProblem = "it cannot be declared: " + err.Error()
			up.listed[name] = lt
			continue
		}
		up.listed[name] = lt
		decls = append(decls, decl)
		if def.OutputSchema != nil {
			outputs[decl.Name] = def.OutputSchema
		}
	}
	return decls, outputs
}

// OutputSchema is the output schema of the upstream tool declared as
// tool (<upstream>.<tool>), from the definition it is declared by (the
// pinned one while it is held); nil when it has none.
func (u *Upstreams) OutputSchema(tool string) json.RawMessage {
	if u == nil {
		return nil
	}
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.outputs[tool]
}

// examine turns a listed tool into what is pinned and declared, or says
// why it cannot be.
func (u *Upstreams) examine(cfg tools.UpstreamConfig, t *sdk.Tool) listedTool {
	def := tools.UpstreamTool{Upstream: cfg.Name, Name: t.Name, Title: t.Title, Description: t.Description}
	if t.Annotations != nil {
		a := t.Annotations
		readOnly, idempotent := a.ReadOnlyHint, a.IdempotentHint
		def.Annotations = tools.Annotations{Title: a.Title, ReadOnly: &readOnly, Destructive: a.DestructiveHint, Idempotent: &idempotent, OpenWorld: a.OpenWorldHint}
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) == 0 || string(schema) == "null" {
		schema = []byte(`{"type":"object"}`)
	}
	def.InputSchema = schema
	if t.OutputSchema != nil {
		if out, err := json.Marshal(t.OutputSchema); err == nil && string(out) != "null" {
			def.OutputSchema = out
		}
	}
	lt := listedTool{def: def}
	if !validToolName(t.Name) {
		lt.problem = "its name is not 1 to 100 of A–Z a–z 0–9 _ . -"
		return lt
	}
	// The specification (and the TypeScript SDK, which refuses the whole
	// listing otherwise) wants an output schema of type "object", as
	// structuredContent is an object.
	if def.OutputSchema != nil {
		var o struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(def.OutputSchema, &o) != nil || o.Type != "object" {
			lt.problem = "its output schema is not an object schema"
			return lt
		}
	}
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || s.Type != "object" {
		lt.problem = "its input schema is not an object schema"
		return lt
	}
	for name := range s.Properties {
		if ReservedArgument(name) {
			lt.problem = fmt.Sprintf("it has an argument named %q, which Gatehouse adds to every tool", name)
			return lt
		}
	}
	if lt.hash, err = def.DefinitionHash(); err != nil {
		lt.problem = "its definition cannot be hashed"
	}
	return lt
}

func validToolName(name string) bool {
	if name == "" || len(name) > 100 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

func key(upstream, tool string) string { return upstream + "/" + tool }

// pin records the definition seen: a new tool is held unless the file
// accepts it; a changed one is held until an admin accepts it.
func (u *Upstreams) pin(ctx context.Context, q *db.Queries, cfg tools.UpstreamConfig, lt listedTool, def json.RawMessage, trigger string) (db.UpstreamTool, error) {
	system := auth.System(u.ws)
	accept := slices.Contains(cfg.Accept, lt.def.Name)
	row, err := q.InsertUpstreamTool(ctx, db.InsertUpstreamToolParams{Upstream: cfg.Name, Name: lt.def.Name, DefinitionHash: lt.hash, Definition: def, Accept: accept})
	if err == nil {
		data := map[string]any{"upstream": cfg.Name, "tool": lt.def.Name, "hash": lt.hash, "status": row.Status, "trigger": trigger}
		if accept {
			data["accepted_by"] = "policy file"
		}
		return row, u.audit(ctx, q, system, "upstream.tool_seen", lt.def.DeclaredName(), data)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return db.UpstreamTool{}, fmt.Errorf("mcp: pin %s: %w", lt.def.DeclaredName(), err)
	}
	cur, err := q.GetUpstreamToolForUpdate(ctx, db.GetUpstreamToolForUpdateParams{Upstream: cfg.Name, Name: lt.def.Name})
	if err != nil {
		return db.UpstreamTool{}, fmt.Errorf("mcp: read pin %s: %w", lt.def.DeclaredName(), err)
	}
	if cur.DefinitionHash == lt.hash {
		return cur, nil
	}
	row, err = q.SeeUpstreamToolDefinition(ctx, db.SeeUpstreamToolDefinitionParams{Upstream: cfg.Name, Name: lt.def.Name, DefinitionHash: lt.hash, Definition: def})
	if err != nil {
		return db.UpstreamTool{}, fmt.Errorf("mcp: see %s: %w", lt.def.DeclaredName(), err)
	}
	action := "upstream.tool_changed"
	if row.Status == "held" {
		action = "upstream.tool_held"
		u.log.Warn("an upstream tool changed its definition: held until an admin accepts it", "tool", lt.def.DeclaredName(),
			"accepted_hash", row.AcceptedHash.String, "new_hash", lt.hash, "trigger", trigger)
	}
	return row, u.audit(ctx, q, system, action, lt.def.DeclaredName(), map[string]any{"upstream": cfg.Name, "tool": lt.def.Name,
		"old_hash": cur.DefinitionHash, "new_hash": lt.hash, "accepted_hash": row.AcceptedHash.String, "status": row.Status, "trigger": trigger})
}

func (u *Upstreams) audit(ctx context.Context, q *db.Queries, p auth.Principal, action, tool string, data map[string]any) error {
	if u.ws == uuid.Nil {
		return nil
	}
	return audit.Record(ctx, q, p, u.ws, action, "tool", tool, data)
}

// Accepted reports, from what this instance last read, whether hash is
// the tool's accepted definition (tools.Forwarder). Whether it is still
// the live one is Forward's question, asked with no transaction open just
// before the call goes out, so a drifted tool's call fails saying what
// drifted rather than as a call that cannot be classified.
func (u *Upstreams) Accepted(upstream, tool, hash string) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return hash != "" && u.pins[key(upstream, tool)].hash == hash
}

// live is the tool as the upstream listed it last; false when it did not
// list it, or listed it in a form that cannot be offered.
func (u *Upstreams) live(upstream, tool string) (listedTool, bool) {
	up, ok := u.named(upstream)
	if !ok {
		return listedTool{}, false
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	lt, ok := up.listed[tool]
	return lt, ok && lt.problem == ""
}

// checkPin reads the tool's pin now and compares it with the live
// definition (the upstream's, as last listed): the call may go on only if
// they are one, the database saw no other since, and (when hash is given)
// the declaration the call was proposed under is that one too. No call is
// made to the upstream. A pin another instance accepted meanwhile is
// declared here at once.
func (u *Upstreams) checkPin(ctx context.Context, upstream, tool, hash string) error {
	declared := upstream + "." + tool
	lt, ok := u.live(upstream, tool)
	if !ok {
		return apperr.Errorf(apperr.EFORBIDDEN, "%s is not available: its upstream no longer lists it.", declared)
	}
	row, found, err := u.pinRow(ctx, upstream, tool)
	if err != nil {
		return fmt.Errorf("mcp: read pin %s: %w", declared, err)
	}
	if !found {
		return apperr.Errorf(apperr.EFORBIDDEN, "%s is held: Gatehouse has no record of its definition; an admin refreshes the upstream at /admin/upstreams.", declared)
	}
	p := pinOf(row)
	u.mu.Lock()
	changed := u.pins[key(upstream, tool)].hash != p.hash
	u.pins[key(upstream, tool)] = p
	u.mu.Unlock()
	if up, ok := u.named(upstream); changed && ok {
		if err := u.declare(up); err != nil {
			return err
		}
	}
	held := &apperr.Error{Code: apperr.EFORBIDDEN, Extra: map[string]any{"upstream_tool_status": "held"}}
	switch {
	case !row.AcceptedHash.Valid:
		held.Message = fmt.Sprintf("%s is held: no admin has accepted its definition yet. An admin reviews and accepts it at /admin/upstreams; until then it cannot be called.", declared)
	case lt.hash != p.hash:
		live, _ := lt.def.Definition()
		held.Message = driftMessage(declared, changedParts(p.def, live), p.hash, lt.hash, "")
		held.Extra["pinned_hash"], held.Extra["live_hash"] = p.hash, lt.hash
	case row.Status != "accepted":
		// Another instance listed a definition this one has not seen.
		held.Message = driftMessage(declared, changedParts(p.def, row.Definition), p.hash, row.DefinitionHash, " (as another Gatehouse instance listed it)")
		held.Extra["pinned_hash"], held.Extra["live_hash"] = p.hash, row.DefinitionHash
	case hash != "" && hash != p.hash:
		held.Message = fmt.Sprintf("%s changed since this call was proposed: the definition it was proposed under is no longer the accepted one, so it does not run. Propose the call again.", declared)
	default:
		return nil
	}
	return held
}

// driftMessage says that a tool is held because its live definition is
// not its pin, and what differs.
func driftMessage(declared, parts string, pinned, live, where string) string {
	return fmt.Sprintf("%s is held: its %s changed upstream since an admin accepted it%s (pinned definition %s, live definition %s). "+
		"An admin reviews the difference and accepts it at /admin/upstreams; until then it cannot be called.", declared, parts, where, short(pinned), short(live))
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12] + "…"
	}
	return hash
}

// changedParts names what differs between two definitions ("description
// and input schema"); "definition" when it cannot tell.
func changedParts(a, b json.RawMessage) string {
	var x, y map[string]any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return "definition"
	}
	var parts []string
	for _, f := range []struct{ key, name string }{{"name", "name"}, {"title", "title"}, {"description", "description"}, {"inputSchema", "input schema"}, {"outputSchema", "output schema"}, {"annotations", "annotations"}} {
		if !reflect.DeepEqual(x[f.key], y[f.key]) {
			parts = append(parts, f.name)
		}
	}
	switch len(parts) {
	case 0:
		return "definition"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// Callable says whether an upstream tool may be called now, with a reason
// the caller can act on when it may not (it is held).
func (u *Upstreams) Callable(ctx context.Context, t *tools.Tool) error {
	if u == nil || t.Upstream == "" {
		return nil
	}
	return u.checkPin(ctx, t.Upstream, strings.TrimPrefix(t.Name, t.Upstream+"."), "")
}

// Forward calls an upstream tool (tools.Forwarder): the pin is read again
// and compared with the live definition, then the call goes to the
// upstream with exactly args, under ctx's deadline. While the live
// definitions may be stale (a list_changed whose listing has not finished,
// a new connection, on which a change may have gone unheard) the tools are
// listed first and the pin checked again. An upstream that answers with an
// error, does not answer in time or cannot be reached fails the call,
// saying which; when retry allows, a call that failed before any answer
// is sent again, twice at most, after 100 ms and 400 ms, and the result
// says how many times it was sent.
func (u *Upstreams) Forward(ctx context.Context, upstream, tool, hash string, args json.RawMessage, retry bool) (json.RawMessage, error) {
	ctx, stop := upstreamContext(ctx)
	defer stop()
	up, ok := u.named(upstream)
	if !ok {
		return nil, apperr.Errorf(apperr.ENOTFOUND, "No upstream is named %q.", upstream)
	}
	attempts := 1
	if retry {
		attempts += len(retryBackoff)
	}
	for n := 1; ; n++ {
		out, transient, err := u.forwardOnce(ctx, up, upstream, tool, hash, args)
		switch {
		case err == nil && n == 1:
			return out, nil
		case err == nil:
			return withAttempts(out, n)
		case !transient || n == attempts:
			var ae *apperr.Error
			if n > 1 && errors.As(err, &ae) {
				tried := *ae
				tried.Message = fmt.Sprintf("%s (sent %d times).", strings.TrimSuffix(ae.Message, "."), n)
				err = &tried
			}
			return nil, err
		}
		u.log.Warn("retrying an upstream call after a transient failure", "upstream", upstream, "tool", tool, "attempt", n, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(retryBackoff[n-1]):
		}
	}
}

// upstreamContext is ctx for a call to an upstream: its deadline and its
// cancellation, and the agent's progress callback, but nothing else the
// agent's request put in it. The SDK keeps the protocol version of the
// request it serves in its context, and its client speaks the version it
// finds there: an agent's 2026-07-28 request made Gatehouse speak
// 2026-07-28 to an upstream that had negotiated 2025-11-25.
func upstreamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	out := context.Background()
	if p := progressOf(ctx); p != nil {
		out = WithProgress(out, p)
	}
	out, cancel := context.WithCancelCause(out)
	var cancelDeadline context.CancelFunc = func() {}
	if dl, ok := ctx.Deadline(); ok {
		// Its own deadline, so that a call past it ends as timed out.
		out, cancelDeadline = context.WithDeadline(out, dl)
	}
	stopAfter := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel(context.Cause(ctx))
		}
	})
	return out, func() {
		stopAfter()
		cancel(context.Canceled)
		cancelDeadline()
	}
}

// retryBackoff is how long Forward waits before each retry of a call that
// may be sent again (a read, a write-idempotent tool) after a transient
// failure: the upstream could not be reached, or the connection failed
// before it answered. An answer (an error result, a JSON-RPC error) and a
// timeout are final.
var retryBackoff = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// withAttempts records in a result how many times the call was sent
// (_meta "gatehouse/attempts"), as the agent and the record see it.
func withAttempts(result json.RawMessage, n int) (json.RawMessage, error) {
	var res map[string]json.RawMessage
	if err := json.Unmarshal(result, &res); err != nil {
		return nil, fmt.Errorf("mcp: read result: %w", err)
	}
	meta := map[string]any{}
	if raw, ok := res["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("mcp: read result _meta: %w", err)
		}
	}
	meta["gatehouse/attempts"] = n
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	res["_meta"] = b
	return json.Marshal(res)
}

// forwardOnce sends the call once; transient says its failure happened
// before the upstream answered, with the time left (it may be sent again
// when the tool allows).
func (u *Upstreams) forwardOnce(ctx context.Context, up *upstream, upstream, tool, hash string, args json.RawMessage) (json.RawMessage, bool, error) {
	if up.retired.Load() {
		// A reload replaced the upstream since the call began: this attempt
		// goes to the one in force.
		cur, ok := u.named(upstream)
		if !ok {
			return nil, false, apperr.Errorf(apperr.EGONE, "The upstream %s was removed from the policy file; the call was not sent.", upstream)
		}
		up = cur
	}
	if err := u.checkPin(ctx, upstream, tool, hash); err != nil {
		return nil, false, err
	}
	relisted, err := u.catchUp(ctx, up)
	if err == nil && relisted {
		if err := u.checkPin(ctx, upstream, tool, hash); err != nil {
			return nil, false, err
		}
	}
	var s *sdk.ClientSession
	if err == nil {
		s, err = u.session(ctx, up)
	}
	if err != nil {
		u.log.Warn("upstream unreachable", "upstream", upstream, "err", err)
		return nil, ctx.Err() == nil, unreachable(ctx, up, err)
	}
	params := &sdk.CallToolParams{Name: tool, Arguments: args}
	if sink := progressOf(ctx); sink != nil {
		// The agent asked for progress: the upstream's, under a token of
		// this call's own, goes to it.
		token := "gatehouse-" + uuid.NewString()
		u.progress.Store(token, sink)
		// The SDK may hand a notification sent just before the answer to
		// its handler just after it: the route stays a moment longer.
		defer time.AfterFunc(time.Second, func() { u.progress.Delete(token) })
		params.SetProgressToken(token)
	}
	res, err := s.CallTool(ctx, params)
	if err != nil {
		var rpc *jsonrpc.Error
		isRPC := errors.As(err, &rpc)
		if ctx.Err() == nil && !isRPC {
			u.drop(up, s) // the connection failed, not the call: reconnect next time
		}
		// No answer came: the connection failed, or the transport refused
		// the request (the SDK's "rejected by transport": it could not be
		// sent, or a 429, 502, 503 or 504 came back).
		transient := ctx.Err() == nil && (!isRPC || rpc.Code == codeRejectedByTransport)
		u.log.Warn("upstream call failed", "upstream", upstream, "tool", tool, "err", err)
		return nil, transient, unreachable(ctx, up, err)
	}
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				texts = append(texts, tc.Text)
			}
		}
		msg := strings.Join(texts, " ")
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		if msg == "" {
			msg = "no message"
		}
		return nil, false, apperr.Errorf(apperr.EINVALID, "The upstream %s answered with an error: %s", upstream, msg)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, false, fmt.Errorf("mcp: encode %s.%s result: %w", upstream, tool, err)
	}
	return out, false, nil
}

// codeRejectedByTransport is the JSON-RPC code the SDK's client gives a
// request its transport could not deliver or that came back 429, 502,
// 503 or 504 (jsonrpc2.ErrRejected): no answer to the call itself.
const codeRejectedByTransport = -32005

// unreachable is the failure of a call that got no answer.
func unreachable(ctx context.Context, up *upstream, err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code != codeRejectedByTransport {
		return apperr.Errorf(apperr.EINVALID, "The upstream %s refused the call: %s.", up.cfg.Name, strings.TrimSuffix(rpc.Message, "."))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return apperr.Errorf(apperr.EGONE, "The upstream %s did not answer within %s; the call may or may not have taken effect there.", up.cfg.Name, up.cfg.Timeout)
	}
	return apperr.Errorf(apperr.EGONE, "The upstream %s could not be reached: %s.", up.cfg.Name, safeCause(err))
}

// The reason an admin gives for accepting a definition is this long (in
// characters), like every reason for a change of class.
const (
	AcceptReasonMin = 10
	AcceptReasonMax = 500
)

// safeCause says why an upstream failed without its URL's secrets: the
// last part of the error chain.
func safeCause(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// Accept is an admin accepting the definition of an upstream tool they
// reviewed, by its hash, for the reason they give (AcceptReasonMin to
// AcceptReasonMax characters): audited and receipted with the reason, and
// callable at once. Without a reason nothing is accepted.
func (u *Upstreams) Accept(ctx context.Context, p auth.Principal, upstream, tool, hash, reason string) error {
	if p.IsAgent() || !p.IsAdmin() {
		return apperr.Errorf(apperr.EFORBIDDEN, "Only an admin accepts an upstream tool's definition.")
	}
	reason = strings.TrimSpace(reason)
	if n := utf8.RuneCountInString(reason); n < AcceptReasonMin || n > AcceptReasonMax {
		return apperr.Invalid("Say why you accept this definition; nothing was accepted.",
			apperr.FieldError{Field: "reason", Message: fmt.Sprintf("must be %d to %d characters", AcceptReasonMin, AcceptReasonMax)})
	}
	if u == nil {
		return apperr.Errorf(apperr.ENOTFOUND, "No upstream is configured.")
	}
	declared := upstream + "." + tool
	tx, err := u.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("mcp: begin: %w", err)
	}
	defer tx.Rollback(ctx)
	q := u.q.WithTx(tx)
	cur, err := q.GetUpstreamToolForUpdate(ctx, db.GetUpstreamToolForUpdateParams{Upstream: upstream, Name: tool})
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.ENOTFOUND, "No upstream tool is named %s.", declared)
	}
	if err != nil {
		return fmt.Errorf("mcp: read pin %s: %w", declared, err)
	}
	if cur.DefinitionHash != hash {
		return apperr.Errorf(apperr.ECONFLICT, "%s changed again since you reviewed it; review the new difference before you accept it.", declared)
	}
	if cur.Status == "accepted" {
		return apperr.Errorf(apperr.ECONFLICT, "%s is accepted already.", declared)
	}
	row, err := q.AcceptUpstreamTool(ctx, db.AcceptUpstreamToolParams{Upstream: upstream, Name: tool, DefinitionHash: hash, AcceptedBy: uuid.NullUUID{UUID: p.UserID, Valid: true}})
	if err != nil {
		return fmt.Errorf("mcp: accept %s: %w", declared, err)
	}
	// Every instance re-reads the pins when this commits (ReloadPins: the
	// update's trigger announces it), so the sessions open there are shown
	// the accepted definition too.
	change := map[string]any{"setting": "upstream_tool", "upstream": upstream, "tool": tool, "old_hash": cur.AcceptedHash.String, "new_hash": row.AcceptedHash.String,
		"reason": reason}
	if err := audit.Record(ctx, q, p, p.WorkspaceID, "upstream.tool_accepted", "tool", declared, change); err != nil {
		return err
	}
	if _, err := receipts.RecordChange(ctx, q, receipts.KindSettingChange, receipts.ActorOf(p, string(p.Role)), p.WorkspaceID, change, time.Now()); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("mcp: commit accept: %w", err)
	}
	u.mu.Lock()
	u.pins[key(upstream, tool)] = pinOf(row)
	u.forgetRowsLocked()
	u.mu.Unlock()
	if up, ok := u.named(upstream); ok {
		return u.declare(up)
	}
	return nil
}

// UpstreamChanges are what a reload did to the upstreams, by name.
type UpstreamChanges struct {
	Added, Changed, Removed, Unchanged []string
}

// retireAfter is how long a retired upstream's session stays open past
// its timeout, for the calls already on it.
const retireAfter = 5 * time.Second

// Reconfigure makes file's upstreams the ones behind the gate (a reload of
// the policy file). swap is the registry's one replacement of everything
// the file declares (tools.Registry.ReplacePolicy), called with every
// upstream's tools as they are now to be declared; the upstreams switch
// with it, or not at all when it fails.
//
// What happens to each upstream, by name:
//   - unchanged (its configuration is the same but for line numbers):
//     kept as it is, session and listing;
//   - changed (anything else: url, command, headers, timeout, accept, its
//     tools' overrides, cheatsheet): replaced by a new upstream with the
//     new configuration. Its tools as last listed are declared under the
//     new overrides in the swap itself, and it is listed again at once
//     over a new session; until that listing is done a forwarded call
//     lists first (its definitions are then compared with the pins, as on
//     any listing). The old session stays open for the calls already on
//     it, up to its timeout, then closes;
//   - added: listed at once, as at start; its tools join the registry
//     when the listing is done (a second change of the registry);
//   - removed: its tools leave the registry in the swap, and its session
//     closes once the calls on it have had their time.
//
// Pins (accepted definitions) are kept by name: a changed upstream's
// tools stay accepted only while their definitions are the pinned ones.
func (u *Upstreams) Reconfigure(file *tools.PolicyFile, swap func(map[string][]tools.Tool) error) (UpstreamChanges, error) {
	if u == nil {
		return UpstreamChanges{}, swap(nil)
	}
	u.reconfMu.Lock()
	defer u.reconfMu.Unlock()
	var ch UpstreamChanges
	cur := map[string]*upstream{}
	for _, up := range u.all() {
		cur[up.cfg.Name] = up
	}
	var next, fresh []*upstream
	var cfgs []tools.UpstreamConfig
	if file != nil {
		cfgs = file.Upstreams
	}
	for _, cfg := range cfgs {
		old, ok := cur[cfg.Name]
		delete(cur, cfg.Name)
		switch {
		case ok && sameUpstream(old.cfg, cfg):
			next = append(next, old)
			ch.Unchanged = append(ch.Unchanged, cfg.Name)
			continue
		case ok:
			ch.Changed = append(ch.Changed, cfg.Name)
		default:
			ch.Added = append(ch.Added, cfg.Name)
		}
		up := &upstream{cfg: cfg, listed: map[string]listedTool{}}
		if ok {
			old.mu.Lock()
			maps.Copy(up.listed, old.listed)
			up.listedAt = old.listedAt
			old.mu.Unlock()
		}
		up.changed("reconfigured") // listed again before its next call
		next = append(next, up)
		fresh = append(fresh, up)
	}
	retired := slices.SortedFunc(maps.Values(cur), func(a, b *upstream) int { return strings.Compare(a.cfg.Name, b.cfg.Name) })
	for _, up := range retired {
		ch.Removed = append(ch.Removed, up.cfg.Name)
	}
	for _, n := range ch.Changed {
		if old, ok := u.named(n); ok {
			retired = append(retired, old)
		}
	}
	// Every declaration lock (only a reconfiguration takes more than one),
	// so that no listing declares between the declarations computed here
	// and the swap, and none of a retired upstream after it.
	locked := append(slices.Clone(next), retired...)
	for _, up := range locked {
		up.declMu.Lock()
	}
	defer func() {
		for _, up := range locked {
			up.declMu.Unlock()
		}
	}()
	decls := map[string][]tools.Tool{}
	outputs := map[string]json.RawMessage{}
	for _, up := range next {
		d, o := u.declarations(up)
		decls[up.cfg.Name] = d
		maps.Copy(outputs, o)
	}
	u.mu.Lock()
	before := u.outputs
	u.outputs = outputs
	u.mu.Unlock()
	if err := swap(decls); err != nil {
		u.mu.Lock()
		u.outputs = before
		u.mu.Unlock()
		return UpstreamChanges{}, err
	}
	for _, up := range retired {
		up.retired.Store(true)
	}
	byName := map[string]*upstream{}
	for _, up := range next {
		byName[up.cfg.Name] = up
	}
	u.cfgMu.Lock()
	u.list, u.byName = next, byName
	u.cfgMu.Unlock()
	u.bgMu.Lock()
	u.retired = append(u.retired, retired...)
	u.bgMu.Unlock()
	for _, up := range retired {
		time.AfterFunc(up.cfg.Timeout+retireAfter, func() {
			up.closeSession()
			u.bgMu.Lock()
			u.retired = slices.DeleteFunc(u.retired, func(x *upstream) bool { return x == up })
			u.bgMu.Unlock()
		})
	}
	for _, up := range fresh {
		u.relistSoon(up)
	}
	return ch, nil
}

// sameUpstream reports whether two configurations of an upstream are the
// same but for where the file declares them.
func sameUpstream(a, b tools.UpstreamConfig) bool {
	return reflect.DeepEqual(withoutLines(a), withoutLines(b))
}

func withoutLines(c tools.UpstreamConfig) tools.UpstreamConfig {
	c.Line = 0
	if c.Tools != nil {
		overrides := make(map[string]tools.UpstreamOverride, len(c.Tools))
		for k, o := range c.Tools {
			o.Line = 0
			overrides[k] = o
		}
		c.Tools = overrides
	}
	return c
}
