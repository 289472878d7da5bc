// Package tools is the registry of tool declarations and their executors.
// A declaration is fixed at start and never changes at runtime.
package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gatehouse/gatehouse/internal/canonjson"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Executor runs a tool whose effect lives in Gatehouse's own database, with
// validated arguments, inside the transaction that claims the call and
// records its result: a crash leaves it done or not started. It returns a
// JSON-marshalable result, or an *apperr.Error that the caller may see (the
// call then counts as failed).
type Executor func(ctx context.Context, q *db.Queries, workspaceID uuid.UUID, args json.RawMessage) (any, error)

// Deliverer performs a tool's effect outside Gatehouse's database (SMTP, a
// webhook, an upstream server). It runs after the call's claim has
// committed, with no database transaction open (a slow receiver never holds
// a pooled connection), under the tool's timeout; ws is the workspace as the
// effect-time decision read it. The Recorder it returns writes what was
// delivered in the transaction that records the result. Errors are as an
// Executor's.
type Deliverer func(ctx context.Context, ws Workspace, args json.RawMessage) (Recorder, error)

// Recorder records a delivery and returns the call's result.
type Recorder func(ctx context.Context, q *db.Queries, workspaceID uuid.UUID) (any, error)

// DefaultDeliverTimeout bounds a delivery whose tool names no timeout.
const DefaultDeliverTimeout = 30 * time.Second

// Tool is one declaration.
type Tool struct {
	Name        string
	Description string
	Effect      policy.Effect
	// Schema is the JSON Schema of the arguments.
	Schema   json.RawMessage
	Contract Contract
	// Exactly one of Execute (an effect in Gatehouse's database) and
	// Deliver (an effect outside it) is set, or neither for a tool its
	// caller runs (Caller).
	Execute Executor
	Deliver Deliverer
	// Caller marks a tool the caller runs itself (the policy file's
	// caller_tools): Gatehouse decides its calls and hands out execution
	// tickets, and never runs it.
	Caller bool
	// Timeout bounds Deliver; DefaultDeliverTimeout when zero.
	Timeout time.Duration
	// Upstream names the MCP upstream server the tool is forwarded to
	// ("" for a built-in); Title is a short human name for it.
	Upstream string
	Title    string
	// Cheatsheet is markdown an agent reads before it writes with the tool
	// (served at gatehouse://tools/<name>/cheatsheet); "" when it has none.
	Cheatsheet string
	// Shadow is the tool as a shadow rule of the policy file declares it
	// (mode: shadow): not enforced, but every live call is decided under
	// it too, and what it would have decided is recorded when it differs.
	// ShadowRule identifies the rule (a hash of that declaration), set by
	// the registry. nil and "" without one.
	Shadow     *Tool
	ShadowRule string

	compiled *jsonschema.Schema
}

// CheatsheetMaxAge is how long a client may use a cheatsheet it read
// before it asks again (with its ETag, which answers 304 when unchanged).
const CheatsheetMaxAge = time.Hour

// CheatsheetETag is the strong ETag of the tool's cheatsheet: a hash of
// its text, the same on REST and MCP.
func (t *Tool) CheatsheetETag() string {
	sum := sha256.Sum256([]byte(t.Cheatsheet))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

// Outside reports whether the tool's effect is outside Gatehouse's
// database, so it runs with no transaction open.
func (t *Tool) Outside() bool { return t.Deliver != nil }

// DeliverTimeout is how long one delivery may take.
func (t *Tool) DeliverTimeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultDeliverTimeout
}

// Run runs the tool start to finish with q: an in-database tool in q's
// transaction; an outside one delivered, then recorded with q. The
// proposals service keeps the two apart so that no transaction is open
// while an outside effect runs; Run is for callers that need not.
func (t *Tool) Run(ctx context.Context, q *db.Queries, workspaceID uuid.UUID, args json.RawMessage) (any, error) {
	if !t.Outside() {
		return t.Execute(ctx, q, workspaceID, args)
	}
	row, err := q.GetWorkspace(ctx, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("tools: read workspace: %w", err)
	}
	record, err := t.Deliver(ctx, WorkspaceOf(row), args)
	if err != nil {
		return nil, err
	}
	return record(ctx, q, workspaceID)
}

// WorkspaceOf is what classification, constraints and deliveries read of a
// workspace row.
func WorkspaceOf(row db.Workspace) Workspace {
	return Workspace{InternalDomains: row.InternalDomains, WebhookAllowlist: row.WebhookAllowlist, AutoApproveHighRisk: row.AutoApproveHighRisk}
}

// Registry holds the declarations by name, and the action classes they
// are classified into. The built-in declarations are fixed at start, as
// the policy file overrides them (declared again in one snapshot when it
// is reloaded: ReplacePolicy); the
// tools of an MCP upstream are declared when Gatehouse lists them (at start
// and on an admin's refresh), each time as a whole new set for that
// upstream, so a caller always reads one consistent snapshot.
type Registry struct {
	classes *policy.ClassRegistry
	mu      sync.Mutex // serialises replacements
	cur     atomic.Pointer[registryState]
	// base are the declarations the registry was made with (the built-in
	// tools), by name: a policy file's overrides apply to them, so a
	// reload that drops an override gives the tool back its own.
	base      map[string]*Tool
	baseNames []string
	// changed are told after a replacement changed the declarations.
	changed []func()
	// refuseDeclarations: the policy file refuses caller tools declared
	// on the fly (caller.go).
	refuseDeclarations atomic.Bool
}

// OnChange has f called (in the replacing goroutine, after the new
// declarations are in force) after every replacement, changed or not: the
// MCP gateway compares what its open sessions were shown and tells those
// that differ (notifications/tools/list_changed).
func (r *Registry) OnChange(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changed = append(r.changed, f)
}

// registryState is one snapshot of the declarations.
type registryState struct {
	byName map[string]*Tool
	names  []string
	hash   string
}

// Hash identifies the declarations in force: the SHA-256 (hex) of the
// canonical JSON (RFC 8785) of every tool's name, description, effect,
// schema and contract. Receipts name it, so an auditor can tell which
// declarations a call was decided under.
func (r *Registry) Hash() string { return r.cur.Load().hash }

// declarationsHash computes Hash.
func declarationsHash(tools []*Tool) (string, error) {
	type decl struct {
		Name, Description string
		Effect            policy.Effect
		Schema            json.RawMessage
		Authority         policy.Authority
		Risk              policy.Risk
		ActionClass       string
		ActionClasses     []string
		Gating            struct {
			Required                bool
			Threshold, ApproverRole string
			Window                  time.Duration
			// Zero when the tool has none (the hash of a registry
			// without them is unchanged).
			EscalateAfter time.Duration `json:",omitempty"`
			EscalateTo    string        `json:",omitempty"`
			Quorum        int           `json:",omitempty"`
		}
		IdempotencyRequired bool
		IdempotencyWindow   time.Duration
		RateLimits          RateLimits
		Retention           time.Duration
		Constraints         []policy.Constraint
		Outside             bool
		Upstream            string `json:",omitempty"`
		Cheatsheet          string `json:",omitempty"`
		Caller              bool   `json:",omitempty"`
		ShadowRule          string `json:",omitempty"`
	}
	out := make([]decl, len(tools))
	for i, t := range tools {
		c := t.Contract
		d := decl{Name: t.Name, Description: t.Description, Effect: t.Effect, Schema: t.Schema, Authority: c.Authority, Risk: c.Risk,
			ActionClass: c.ActionClass, ActionClasses: c.ActionClasses, IdempotencyRequired: c.Idempotency.Required,
			IdempotencyWindow: c.Idempotency.Window, RateLimits: c.RateLimits, Retention: c.Retention, Constraints: c.Constraints, Outside: t.Outside(),
			Upstream: t.Upstream, Cheatsheet: t.Cheatsheet, Caller: t.Caller, ShadowRule: t.ShadowRule}
		d.Gating.Required, d.Gating.Threshold, d.Gating.ApproverRole, d.Gating.Window = c.Gating.Required, c.Gating.Threshold, c.Gating.ApproverRole, c.Gating.Window
		d.Gating.EscalateAfter, d.Gating.EscalateTo, d.Gating.Quorum = c.Gating.Escalation.After, c.Gating.Escalation.To, c.Gating.Quorum
		out[i] = d
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("tools: encode declarations: %w", err)
	}
	canonical, err := canonjson.Transform(b)
	if err != nil {
		return "", fmt.Errorf("tools: canonical declarations: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), nil
}

// NewRegistry checks each declaration (its contract, against the action
// classes) and compiles its schema; a bad declaration is an error naming
// the tool, which stops the server.
func NewRegistry(classes *policy.ClassRegistry, decls ...Tool) (*Registry, error) {
	r := &Registry{classes: classes}
	st, err := r.build(nil, decls)
	if err != nil {
		return nil, err
	}
	r.base, r.baseNames = st.byName, st.names
	r.cur.Store(st)
	return r, nil
}

// build is a new snapshot: keep's tools (already checked) and decls,
// each checked and compiled.
func (r *Registry) build(keep []*Tool, decls []Tool) (*registryState, error) {
	st := &registryState{byName: map[string]*Tool{}}
	for _, t := range keep {
		st.byName[t.Name] = t
		st.names = append(st.names, t.Name)
	}
	for _, d := range decls {
		if _, dup := st.byName[d.Name]; dup {
			return nil, fmt.Errorf("tools: %s is declared twice", d.Name)
		}
		t, err := r.prepare(d)
		if err != nil {
			return nil, err
		}
		st.byName[d.Name] = t
		st.names = append(st.names, d.Name)
	}
	sort.Strings(st.names)
	list := make([]*Tool, len(st.names))
	for i, n := range st.names {
		list[i] = st.byName[n]
	}
	hash, err := declarationsHash(list)
	if err != nil {
		return nil, err
	}
	st.hash = hash
	return st, nil
}

// prepare checks one declaration and compiles its schema.
func (r *Registry) prepare(d Tool) (*Tool, error) {
	switch d.Effect {
	case policy.EffectRead, policy.EffectMutate, policy.EffectDestructive:
	default:
		return nil, fmt.Errorf("tools: %s has unknown effect %q", d.Name, d.Effect)
	}
	switch {
	case d.Caller && (d.Execute != nil || d.Deliver != nil):
		return nil, fmt.Errorf("tools: %s is run by its caller: it has neither an executor nor a deliverer", d.Name)
	case !d.Caller && (d.Execute == nil) == (d.Deliver == nil):
		return nil, fmt.Errorf("tools: %s needs exactly one of an executor (an effect in the database) and a deliverer (an effect outside it)", d.Name)
	}
	if err := d.settle(r.classes); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.Schema))
	if err != nil {
		return nil, fmt.Errorf("tools: %s schema: %w", d.Name, err)
	}
	c := jsonschema.NewCompiler()
	url := "gatehouse:tool/" + d.Name
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tools: %s schema: %w", d.Name, err)
	}
	if d.compiled, err = c.Compile(url); err != nil {
		return nil, fmt.Errorf("tools: %s schema: %w", d.Name, err)
	}
	d.ShadowRule = ""
	if d.Shadow != nil {
		// The shadow rule's declaration, checked as any is; a hash of it
		// names the rule, so that its counts start again when it changes.
		sd := *d.Shadow
		sd.Shadow, sd.compiled = nil, nil
		if sd.Name != d.Name {
			return nil, fmt.Errorf("tools: %s: its shadow rule declares %s", d.Name, sd.Name)
		}
		shadow, err := r.prepare(sd)
		if err != nil {
			return nil, fmt.Errorf("tools: %s (mode: shadow): %s", d.Name, strings.TrimPrefix(err.Error(), "tools: "))
		}
		h, err := declarationsHash([]*Tool{shadow})
		if err != nil {
			return nil, err
		}
		d.Shadow, d.ShadowRule = shadow, h[:16]
	}
	return &d, nil
}

// ReplaceUpstream declares the tools of one MCP upstream in place of those
// it had: every other declaration stays as it is. Each declaration must
// name the upstream (Tool.Upstream); a bad one leaves the registry as it
// was and is returned, naming the tool.
func (r *Registry) ReplaceUpstream(upstream string, decls []Tool) error {
	if upstream == "" {
		return errors.New("tools: an upstream needs a name")
	}
	for _, d := range decls {
		if d.Upstream != upstream {
			return fmt.Errorf("tools: %s is not a tool of upstream %s", d.Name, upstream)
		}
	}
	return r.replace(func(t *Tool) bool { return t.Upstream != upstream }, decls, nil)
}

// Override declares tools again in place of those of the same names (the
// policy file's overrides of built-in tools, ApplyOverrides): each is
// checked as a declaration; a bad one leaves the registry as it was.
func (r *Registry) Override(decls []Tool) error {
	replaced := map[string]bool{}
	for _, d := range decls {
		replaced[d.Name] = true
	}
	return r.replace(func(t *Tool) bool { return !replaced[t.Name] }, decls, func(cur *registryState) error {
		for _, d := range decls {
			if _, ok := cur.byName[d.Name]; !ok {
				return fmt.Errorf("tools: %s is not declared", d.Name)
			}
		}
		return nil
	})
}

// replace stores a new snapshot of the current tools keep selects and of
// decls (each checked and compiled), and then tells the OnChange
// listeners; check, if any, vets the current snapshot first. A bad
// declaration leaves the registry as it was.
func (r *Registry) replace(keep func(*Tool) bool, decls []Tool, check func(cur *registryState) error) error {
	r.mu.Lock()
	old := r.cur.Load()
	if check != nil {
		if err := check(old); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	var kept []*Tool
	for _, n := range old.names {
		if t := old.byName[n]; keep(t) {
			kept = append(kept, t)
		}
	}
	st, err := r.build(kept, decls)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	r.cur.Store(st)
	changed := slices.Clone(r.changed)
	r.mu.Unlock()
	for _, f := range changed {
		f()
	}
	return nil
}

// Get returns the tool of that name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.cur.Load().byName[name]
	return t, ok
}

// Classes are the action classes the registry classifies calls into.
func (r *Registry) Classes() *policy.ClassRegistry { return r.classes }

// List returns every tool, by name.
func (r *Registry) List() []*Tool {
	st := r.cur.Load()
	out := make([]*Tool, len(st.names))
	for i, n := range st.names {
		out[i] = st.byName[n]
	}
	return out
}

// ValidateArguments checks arguments against the tool's schema and names
// each field at fault ("arguments.key", "arguments.value"…).
func (t *Tool) ValidateArguments(args json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return apperr.Invalid("The arguments must be a JSON object.", apperr.FieldError{Field: "arguments", Message: "must be a JSON object"})
	}
	err = t.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("tools: validate %s: %w", t.Name, err)
	}
	var fields []apperr.FieldError
	seen := map[string]bool{}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		field := "arguments"
		if loc := strings.Trim(u.InstanceLocation, "/"); loc != "" {
			field += "." + strings.ReplaceAll(loc, "/", ".")
		}
		msg := u.Error.String()
		if msg == "'allOf' failed" {
			continue // its parts name what failed (a declared tool's two schemas)
		}
		// "missing property 'key'" belongs to the missing field itself.
		after, ok := strings.CutPrefix(msg, "missing property ")
		if !ok {
			after, ok = strings.CutPrefix(msg, "missing properties ")
		}
		if ok {
			for _, name := range strings.Split(after, ", ") {
				f := field + "." + strings.Trim(name, "'")
				if !seen[f] {
					seen[f] = true
					fields = append(fields, apperr.FieldError{Field: f, Message: "is required"})
				}
			}
			continue
		}
		if !seen[field+msg] {
			seen[field+msg] = true
			fields = append(fields, apperr.FieldError{Field: field, Message: msg})
		}
	}
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		names = append(names, f.Field)
	}
	return apperr.Invalid(fmt.Sprintf("The arguments do not fit %s: %s.", t.Name, strings.Join(names, ", ")), fields...)
}

// Check reports whether d would be accepted into the registry (its
// contract and its schema), without declaring it.
func (r *Registry) Check(d Tool) error {
	_, err := r.prepare(d)
	return err
}
