package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/clip"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Caller tools declared on the fly: an agent's code sends its tool's
// declaration with the call (what it does, its effect and authority
// class), and the call is decided under it exactly as a call of a tool
// the policy file declares. A declaration adds a gate and never removes
// one: the agent runs the tool itself and could run it without asking, so
// what it declares can only make Gatehouse ask more. Hence the rules:
//
//   - a name of a tool Gatehouse runs (a built-in's, an upstream's, or one
//     in their groups) is refused;
//   - where the policy file declares the tool, the declaration can only
//     tighten it: a looser effect, authority or action class is refused,
//     a stricter one applies to that call, and the arguments must fit both
//     schemas;
//   - the policy file may refuse declarations altogether
//     (caller_declarations: refuse); by default they are allowed.
//
// The declaration is kept with the call (proposals.caller_declaration), so
// every later step decides it again under what was declared.

// Whether callers may declare their tools with a call (the policy file's
// caller_declarations).
const (
	CallerDeclarationsAllow  = "allow"
	CallerDeclarationsRefuse = "refuse"
)

// MaxDeclaredSchema bounds a declared schema (compact JSON).
const MaxDeclaredSchema = 64 << 10

// CallerDeclaration is a caller tool as its caller declares it with a
// call.
type CallerDeclaration struct {
	// Name, when sent, is the call's tool.
	Name        string           `json:"name,omitempty"`
	Description string           `json:"description"`
	Effect      policy.Effect    `json:"effect"`
	Authority   policy.Authority `json:"authority"`
	// ActionClass is a registered class; DefaultDeclaredClass of the
	// effect when empty.
	ActionClass string `json:"action_class,omitempty"`
	// Schema is the JSON Schema of the arguments (type: object); any
	// object when empty.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// DefaultDeclaredClass is the action class of a declared tool that names
// none: read.context for a read, tool.call.local (the class of
// Gatehouse's own changes, in the internal group) for a change. A tool
// that reaches outside names its class: tool.call.external or a sharper
// one.
func DefaultDeclaredClass(e policy.Effect) string {
	if e == policy.EffectRead {
		return ClassReadContext
	}
	return ClassToolCallLocal
}

// parseCallerDeclarations reads caller_declarations: allow or refuse.
func parseCallerDeclarations(n *yaml.Node) (string, error) {
	v, err := decodeAs[string](n, "caller_declarations")
	if err != nil {
		return "", err
	}
	if v != CallerDeclarationsAllow && v != CallerDeclarationsRefuse {
		return "", lineError(n, "caller_declarations must be allow or refuse (got %q)", v)
	}
	return v, nil
}

// SetCallerDeclarations puts in force what the policy file says of
// caller tools declared on the fly (caller_declarations; no file: they
// are allowed). DeclareCallerTools calls it; so must anything else that
// puts a file in force.
func (r *Registry) SetCallerDeclarations(f *PolicyFile) {
	r.refuseDeclarations.Store(f != nil && f.CallerDeclarations == CallerDeclarationsRefuse)
}

// DeclarationsRefused reports whether the policy file refuses caller
// tools declared on the fly.
func (r *Registry) DeclarationsRefused() bool { return r.refuseDeclarations.Load() }

// MayDeclare reports whether a caller may declare a tool of this name
// with a call: a name in dot notation that is no tool of Gatehouse's and
// in none of their groups.
func (r *Registry) MayDeclare(name string) bool { return r.declarableName(name) == nil }

// DeclaredTool is the tool a call declares with it, as the call is
// proposed now, and the declaration as it is kept with the call. The
// refusals name the field at fault: 422 for a declaration that is not
// one, names a tool of Gatehouse's, or is looser than the policy file's
// entry for the name; 403 where the file refuses declarations.
func (r *Registry) DeclaredTool(name string, d CallerDeclaration) (*Tool, json.RawMessage, error) {
	if r.refuseDeclarations.Load() {
		return nil, nil, &apperr.Error{Code: apperr.EFORBIDDEN,
			Message: fmt.Sprintf("This deployment's policy file refuses tools declared with the call (caller_declarations: refuse): ask its operator to declare %s under caller_tools, then call it without a declaration.", name),
			Fields:  []apperr.FieldError{{Field: "declaration", Message: "is refused by the policy file"}}}
	}
	d, err := r.checkDeclaration(name, d)
	if err != nil {
		return nil, nil, err
	}
	t, err := r.declared(name, d, true)
	if err != nil {
		return nil, nil, err
	}
	d.Name = ""
	kept, err := json.Marshal(d)
	if err != nil {
		return nil, nil, fmt.Errorf("tools: encode declaration: %w", err)
	}
	return t, kept, nil
}

// RedeclaredTool is the tool of a call kept with its declaration (kept,
// as DeclaredTool returned it), as the registry and the policy file are
// now: where the file declares the name, the stricter of the two on
// each point. It refuses only a declaration that no longer makes a tool
// (its name became a tool of Gatehouse's).
func (r *Registry) RedeclaredTool(name string, kept []byte) (*Tool, error) {
	var d CallerDeclaration
	if err := json.Unmarshal(kept, &d); err != nil {
		return nil, fmt.Errorf("tools: %s: read declaration: %w", name, err)
	}
	d, err := r.checkDeclaration(name, d)
	if err != nil {
		return nil, fmt.Errorf("tools: %s: the declaration kept with the call no longer holds: %s", name, apperr.Message(err))
	}
	return r.declared(name, d, false)
}

// ParseDeclaration reads a declaration kept with a call (nil for none or
// one that cannot be read).
func ParseDeclaration(kept []byte) *CallerDeclaration {
	if len(kept) == 0 {
		return nil
	}
	var d CallerDeclaration
	if json.Unmarshal(kept, &d) != nil {
		return nil
	}
	return &d
}

// declarableName refuses a name a declaration cannot take, naming the
// call's tool.
func (r *Registry) declarableName(name string) error {
	if !callerToolName.MatchString(name) || len(name) > 100 {
		return apperr.Invalid("A declared tool needs a name of at most 100 characters in dot notation, such as app.send_invoice.",
			apperr.FieldError{Field: "tool", Message: "must be a name in dot notation (app.send_invoice)"})
	}
	if t, ok := r.Get(name); ok {
		if t.Caller {
			return nil // the policy file's: a declaration tightens it
		}
		return apperr.Invalid(fmt.Sprintf("%s is a tool Gatehouse runs: call it without a declaration.", name),
			apperr.FieldError{Field: "tool", Message: "is the name of a tool Gatehouse runs"})
	}
	group, _, _ := strings.Cut(name, ".")
	for _, t := range r.List() {
		if g, _, _ := strings.Cut(t.Name, "."); !t.Caller && g == group {
			return apperr.Invalid(fmt.Sprintf("The group %s belongs to tools Gatehouse runs (%s): name your tool in a group of its own.", group, t.Name),
				apperr.FieldError{Field: "tool", Message: "is in the group of a tool Gatehouse runs"})
		}
	}
	return nil
}

// checkDeclaration validates a declaration on its own, naming each field
// at fault, and returns it normalised (trimmed, its class canonical, its
// schema compact).
func (r *Registry) checkDeclaration(name string, d CallerDeclaration) (CallerDeclaration, error) {
	if err := r.declarableName(name); err != nil {
		return d, err
	}
	var fields []apperr.FieldError
	bad := func(field, msg string) {
		fields = append(fields, apperr.FieldError{Field: "declaration." + field, Message: msg})
	}
	if d.Name != "" && d.Name != name {
		bad("name", "must be the call's tool ("+name+")")
	}
	d.Description = strings.TrimSpace(d.Description)
	if n := utf8.RuneCountInString(d.Description); n < 1 || n > maxCallerDescription {
		bad("description", fmt.Sprintf("must say what the tool does in 1 to %d characters", maxCallerDescription))
	}
	effectOK := slices.Contains(policy.Effects, d.Effect)
	if !effectOK {
		bad("effect", "must be read, mutate or destructive")
	}
	switch {
	case !d.Authority.Valid():
		bad("authority", "must be read, write-idempotent, write-non-idempotent or irreversible")
	case effectOK && !slices.Contains(authorityForEffect[d.Effect], d.Authority):
		bad("authority", fmt.Sprintf("%s does not fit effect %s (it fits %s)", d.Authority, d.Effect, joinAuthorities(authorityForEffect[d.Effect])))
	}
	if d.ActionClass != "" {
		class, err := canonicalRegistered(r.classes, d.ActionClass)
		switch {
		case err != nil:
			bad("action_class", "is not a registered action class")
		case class == ClassReadContext && effectOK && d.Effect != policy.EffectRead:
			bad("action_class", "read.context is the class of reads; a change names another (tool.call.local by default)")
		default:
			d.ActionClass = class
		}
	}
	if len(bytes.TrimSpace(d.Schema)) > 0 && string(bytes.TrimSpace(d.Schema)) != "null" {
		schema, msg := declaredSchema(d.Schema)
		if msg != "" {
			bad("schema", msg)
		}
		d.Schema = schema
	} else {
		d.Schema = nil
	}
	if len(fields) > 0 {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.Field
		}
		return d, apperr.Invalid("Invalid declaration: "+strings.Join(names, ", ")+".", fields...)
	}
	return d, nil
}

func joinAuthorities(as []policy.Authority) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return strings.Join(s, " or ")
}

// declaredSchema checks a declared schema: a JSON Schema of an object, at
// most MaxDeclaredSchema bytes, that compiles on its own (no reference
// outside itself is loaded). It returns the schema compacted, or why not.
func declaredSchema(raw json.RawMessage) (json.RawMessage, string) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, "must be a JSON Schema"
	}
	if buf.Len() > MaxDeclaredSchema {
		return nil, fmt.Sprintf("has more than %d bytes", MaxDeclaredSchema)
	}
	var top map[string]any
	if json.Unmarshal(buf.Bytes(), &top) != nil || top["type"] != "object" {
		return nil, "must be a JSON Schema with type: object (a call's arguments are an object)"
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, "must be a JSON Schema"
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // nothing outside the schema is read
	if err := c.AddResource("gatehouse:declared", doc); err != nil {
		return nil, "is not a valid JSON Schema"
	}
	if _, err := c.Compile("gatehouse:declared"); err != nil {
		return nil, clip.Ellipsis("is not a valid JSON Schema: "+err.Error(), 300)
	}
	return buf.Bytes(), ""
}

// declared is the tool of a checked declaration: the file's caller tool
// of that name tightened by it, or the declaration alone. strict refuses
// a declaration looser than the file's (when the call is proposed); not
// strict, the stricter of the two holds on each point (the file may have
// changed since).
func (r *Registry) declared(name string, d CallerDeclaration, strict bool) (*Tool, error) {
	var t Tool
	if file, ok := r.Get(name); ok {
		var err error
		if t, err = r.tightened(file, d, strict); err != nil {
			return nil, err
		}
	} else {
		t = Tool{Name: name, Description: d.Description, Effect: d.Effect, Schema: d.Schema, Caller: true}
		if t.Schema == nil {
			t.Schema = json.RawMessage(`{"type":"object"}`)
		}
		k := &t.Contract
		k.Authority, k.ActionClass = d.Authority, d.ActionClass
		if k.ActionClass == "" {
			k.ActionClass = DefaultDeclaredClass(d.Effect)
		}
		k.ClassRationale = fmt.Sprintf("Declared by its caller with the call (effect %s, authority %s); Gatehouse does not run it and cannot check what it does.", d.Effect, d.Authority)
		k.Gating.Required = d.Authority == policy.AuthorityIrreversible
		k.Idempotency.Required = d.Authority == policy.AuthorityWriteNonIdempotent || d.Authority == policy.AuthorityIrreversible
	}
	out, err := r.prepare(t)
	if err != nil {
		return nil, apperr.Invalid("The declaration does not make a tool: "+err.Error(), apperr.FieldError{Field: "declaration", Message: err.Error()})
	}
	out.Contract.Summarize = declaredSummary(out, d.Description)
	return out, nil
}

// declaredSummary is the sentence an approver reads first for a declared
// tool's call: what its caller says the tool does, then the arguments.
func declaredSummary(t *Tool, description string) func(map[string]any) string {
	what := clip.Ellipsis(strings.TrimSuffix(description, "."), 200)
	return func(args map[string]any) string {
		s := fmt.Sprintf("Run %s, which its caller declares as: %s", t.Name, what)
		var parts []string
		for _, p := range t.Params() {
			if v, ok := args[p.Name]; ok {
				b, _ := json.Marshal(v)
				parts = append(parts, p.Name+" "+clip.Ellipsis(string(b), 60))
			}
		}
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, ", ") + ")"
		}
		return s
	}
}

var groupRank = map[policy.ClassGroup]int{policy.GroupInternal: 0, policy.GroupExternalControlled: 1, policy.GroupExternal: 2, policy.GroupHumanOnly: 3}

// tightened is the file's caller tool as the declaration tightens it.
// strict: a point where the declaration is looser is refused, naming it;
// otherwise the file's holds there.
func (r *Registry) tightened(file *Tool, d CallerDeclaration, strict bool) (Tool, error) {
	t := *file
	t.compiled = nil
	k := &t.Contract
	k.Constraints, k.PIIFields, k.ActionClasses = slices.Clone(k.Constraints), slices.Clone(k.PIIFields), nil
	var looser []apperr.FieldError
	loose := func(field, msg string) {
		looser = append(looser, apperr.FieldError{Field: "declaration." + field, Message: msg})
	}
	var said []string
	if effectRank[d.Effect] < effectRank[t.Effect] {
		loose("effect", fmt.Sprintf("is looser than the policy file's %s for this tool", t.Effect))
	} else if d.Effect != t.Effect {
		t.Effect = d.Effect
		said = append(said, "effect "+string(d.Effect))
	}
	authority := k.Authority
	if authorityRank[d.Authority] < authorityRank[authority] {
		loose("authority", fmt.Sprintf("is looser than the policy file's %s for this tool", authority))
	} else {
		authority = d.Authority
	}
	// Where only one side moved, the authority is raised (or the effect)
	// until the two fit, as an upstream tool's are.
	fits := authorityForEffect[t.Effect]
	switch {
	case authorityRank[authority] > authorityRank[fits[len(fits)-1]]:
		for _, e := range []policy.Effect{policy.EffectMutate, policy.EffectDestructive} {
			if slices.Contains(authorityForEffect[e], authority) {
				t.Effect = e
				break
			}
		}
	case !slices.Contains(fits, authority):
		authority = fits[len(fits)-1]
	}
	if t.Effect != file.Effect && !slices.Contains(said, "effect "+string(t.Effect)) {
		said = append(said, "effect "+string(t.Effect))
	}
	if authority != k.Authority {
		if k.RateLimits == rateLimitsByAuthority[k.Authority] {
			k.RateLimits = RateLimits{} // the old class's default: the new class's instead
		}
		if authority == policy.AuthorityIrreversible {
			// The file's gating spoke of a class that could be undone.
			k.Gating.Required, k.Gating.NotGatedReason = true, ""
			if !strings.HasPrefix(strings.ToLower(k.Reversibility), strings.ToLower(NoneViaTools)) {
				k.Reversibility = ""
			}
		}
		k.Authority, k.Retention, k.Idempotency.Window = authority, 0, 0
		k.Idempotency.Required = k.Idempotency.Required || authority == policy.AuthorityWriteNonIdempotent || authority == policy.AuthorityIrreversible
		said = append(said, "authority "+string(authority))
	}
	if t.Effect != file.Effect && riskRank[policy.DefaultRisk(t.Effect)] > riskRank[k.Risk] {
		k.Risk = policy.DefaultRisk(t.Effect)
	}
	if t.Effect != policy.EffectRead && k.ActionClass == ClassReadContext {
		k.ActionClass = ClassToolCallLocal // a change is not a read's class
	}
	if d.ActionClass != "" && d.ActionClass != k.ActionClass {
		fileGroup, _ := r.classes.Group(k.ActionClass)
		declGroup, _ := r.classes.Group(d.ActionClass)
		if groupRank[declGroup] <= groupRank[fileGroup] {
			loose("action_class", fmt.Sprintf("is not stricter than the policy file's %s (group %s): name it, or a class of a stricter group", k.ActionClass, fileGroup))
		} else {
			k.ActionClass = d.ActionClass
			said = append(said, "action class "+d.ActionClass)
		}
	}
	if strict && len(looser) > 0 {
		names := make([]string, len(looser))
		for i, f := range looser {
			names[i] = f.Field
		}
		return Tool{}, apperr.Invalid(fmt.Sprintf("The declaration is looser than the policy file's entry for %s (%s): a declaration can only tighten what the operator's file says.",
			t.Name, strings.Join(names, ", ")), looser...)
	}
	if len(said) > 0 {
		k.ClassRationale = clip.Ellipsis(k.ClassRationale+" Its caller declared it stricter for this call: "+strings.Join(said, ", ")+".", maxRationale)
	}
	if d.Schema != nil {
		schema, err := bothSchemas(t.Schema, d.Schema)
		if err != nil {
			return Tool{}, err
		}
		t.Schema = schema
	}
	return t, nil
}

// bothSchemas is a schema that the arguments fit when they fit both: the
// file's, with the declared one as a resource of its own in allOf (its
// references resolve within it).
func bothSchemas(file, declared json.RawMessage) (json.RawMessage, error) {
	var f, d map[string]any
	if err := json.Unmarshal(file, &f); err != nil {
		return nil, fmt.Errorf("tools: read schema: %w", err)
	}
	if err := json.Unmarshal(declared, &d); err != nil {
		return nil, fmt.Errorf("tools: read declared schema: %w", err)
	}
	d["$id"] = "gatehouse:declared"
	all, _ := f["allOf"].([]any)
	f["allOf"] = append(slices.Clone(all), d)
	return json.Marshal(f)
}
