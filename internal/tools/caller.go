package tools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// Caller-executed tools are the agent's own tools (an invoice sender in
// its own process): the policy file declares them under caller_tools, and
// a call is proposed and decided like any other. Gatehouse never runs
// one: when it may run, the caller gets an execution ticket, runs the
// tool itself and reports the outcome (internal/proposals, caller.go).

// CallerToolConfig is one caller_tools entry of the policy file.
type CallerToolConfig struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the arguments ({"type":"object"} when
	// the file gives none).
	Schema json.RawMessage
	// Contract is what the file says of its class, gating and limits, in
	// the words of a built-in tool's override.
	Contract UpstreamOverride
	Line     int
}

// callerToolName is what a caller tool may be called: a group and a name
// in dot notation, like the built-in tools (app.send_invoice).
var callerToolName = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$`)

// maxCallerDescription bounds a caller tool's description.
const maxCallerDescription = 1000

// parseCallerTools reads caller_tools: a list of declarations, each
// with the keys of a built-in tool's override plus name, description and
// schema; effect, authority, action_class and class_rationale are
// required (a tool Gatehouse never sees has no annotations to fall back
// on).
func parseCallerTools(n *yaml.Node, classes *policy.ClassRegistry) ([]CallerToolConfig, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, lineError(n, "caller_tools must be a list of tool declarations")
	}
	own := []string{"name", "description", "schema"}
	var out []CallerToolConfig
	seen := map[string]int{}
	for _, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			return nil, lineError(item, "caller_tools: each entry is a mapping with name, description, effect, authority, action_class and class_rationale")
		}
		c := CallerToolConfig{Line: item.Line}
		rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: item.Line, Column: item.Column}
		for i := 0; i+1 < len(item.Content); i += 2 {
			k, v := item.Content[i], item.Content[i+1]
			if !slices.Contains(own, k.Value) {
				rest.Content = append(rest.Content, k, v)
				continue
			}
			switch k.Value {
			case "name", "description":
				s, err := decodeAs[string](v, k.Value)
				if err != nil {
					return nil, err
				}
				if k.Value == "name" {
					c.Name = strings.TrimSpace(s)
				} else {
					c.Description = strings.TrimSpace(s)
				}
			case "schema":
				schema, err := callerSchema(v)
				if err != nil {
					return nil, err
				}
				c.Schema = schema
			}
		}
		if !callerToolName.MatchString(c.Name) || len(c.Name) > 100 {
			return nil, lineError(item, "caller_tools: a tool needs a name of at most 100 characters in dot notation, like app.send_invoice (got %q)", c.Name)
		}
		if line, dup := seen[c.Name]; dup {
			return nil, lineError(item, "caller_tools: %s is declared twice (first on line %d)", c.Name, line)
		}
		seen[c.Name] = c.Line
		if l := utf8.RuneCountInString(c.Description); l < 1 || l > maxCallerDescription {
			return nil, lineError(item, "%s: description must be 1 to %d characters", c.Name, maxCallerDescription)
		}
		o, err := parseOverride(rest, c.Name, classes)
		if err != nil {
			return nil, err
		}
		for _, req := range []struct {
			key   string
			given bool
		}{{"effect", o.Effect != ""}, {"authority", o.Authority != ""}, {"action_class", o.ActionClass != ""}, {"class_rationale", o.ClassRationale != ""}} {
			if !req.given {
				return nil, lineError(item, "%s: a caller tool declares its %s", c.Name, req.key)
			}
		}
		o.Line = item.Line
		c.Contract = o
		if c.Schema == nil {
			c.Schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, c)
	}
	return out, nil
}

// callerSchema turns a schema written as YAML into JSON; its top level
// describes an object (a call's arguments always are one).
func callerSchema(v *yaml.Node) (json.RawMessage, error) {
	var doc any
	if err := v.Decode(&doc); err != nil {
		return nil, lineError(v, "schema: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	m, ok := doc.(map[string]any)
	if !ok || m["type"] != "object" {
		return nil, lineError(v, "schema must be a JSON Schema mapping with type: object")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, lineError(v, "schema cannot be written as JSON: %v", err)
	}
	return b, nil
}

// checkCallerNames refuses a caller tool whose name an upstream's tools
// could take (<upstream>.<tool>).
func checkCallerNames(f *PolicyFile) error {
	for _, c := range f.CallerTools {
		group, _, _ := strings.Cut(c.Name, ".")
		for _, u := range f.Upstreams {
			if u.Name == group {
				return fmt.Errorf("line %d: caller_tools: %s is named like a tool of upstream %s (line %d); choose another group", c.Line, c.Name, u.Name, u.Line)
			}
		}
	}
	return nil
}

// Declaration is the registry tool a caller_tools entry declares.
func (c CallerToolConfig) Declaration() Tool {
	o := c.Contract
	t := Tool{Name: c.Name, Description: c.Description, Effect: o.Effect, Schema: c.Schema, Caller: true, Cheatsheet: o.Cheatsheet}
	k := &t.Contract
	k.Authority, k.ActionClass, k.Risk = o.Authority, o.ActionClass, o.Risk
	k.ClassRationale, k.Reversibility, k.PIIFields, k.SLA = o.ClassRationale, o.Reversibility, o.PIIFields, o.SLA
	k.RateLimits, k.Constraints = o.RateLimits, o.Constraints
	k.Gating.Threshold, k.Gating.ApproverRole, k.Gating.Escalation, k.Gating.Quorum = o.Threshold, o.ApproverRole, o.Escalation, o.Quorum
	// An irreversible tool is human-gated unless the file says otherwise.
	k.Gating.Required = o.Authority == policy.AuthorityIrreversible
	if o.HumanGated != nil {
		k.Gating.Required = *o.HumanGated
	}
	if !k.Gating.Required && o.Authority == policy.AuthorityIrreversible {
		k.Gating.NotGatedReason = "The policy file declares it without human gating (human_gated: false)."
	}
	// The classes that must not run twice need a key (as every tool's).
	k.Idempotency.Required = o.Authority == policy.AuthorityWriteNonIdempotent || o.Authority == policy.AuthorityIrreversible
	return t
}

// DeclareCallerTools declares the policy file's caller tools in the
// registry in place of those it had, each checked as any declaration is;
// a name that a built-in (or an upstream's) tool has is refused, naming
// the file's line. It also sets whether callers may declare their own
// tools with a call (caller_declarations). A bad file leaves the registry
// as it was.
func DeclareCallerTools(r *Registry, f *PolicyFile) error {
	var decls []Tool
	if f != nil {
		decls = make([]Tool, 0, len(f.CallerTools))
	}
	for _, c := range f.callerTools() {
		if t, taken := r.Get(c.Name); taken && !t.Caller {
			return fmt.Errorf("policy file: line %d: caller_tools: %s is the name of a tool Gatehouse runs; choose another", c.Line, c.Name)
		}
		d := c.Declaration()
		if _, err := r.prepare(d); err != nil {
			return fmt.Errorf("policy file: line %d: caller_tools: %w", c.Line, err)
		}
		decls = append(decls, d)
	}
	if len(decls) > 0 || len(r.CallerTools()) > 0 {
		if err := r.replace(func(t *Tool) bool { return !t.Caller }, decls, nil); err != nil {
			return fmt.Errorf("policy file: %w", err)
		}
	}
	r.SetCallerDeclarations(f)
	return nil
}

// callerTools are the file's caller tools (none for no file).
func (f *PolicyFile) callerTools() []CallerToolConfig {
	if f == nil {
		return nil
	}
	return f.CallerTools
}

// CallerTools are the names of the registry's caller-executed tools.
func (r *Registry) CallerTools() []string {
	var out []string
	for _, t := range r.List() {
		if t.Caller {
			out = append(out, t.Name)
		}
	}
	return out
}
