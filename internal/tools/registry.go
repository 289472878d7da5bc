// Package tools is the registry of tool declarations and their executors.
// A declaration is fixed at start and never changes at runtime.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gatehouse/gatehouse/db"
	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// Executor runs a tool with validated arguments inside the transaction that
// records its result, so an effect on the workspace's own store and its
// record commit together. It returns a JSON-marshalable result, or an
// *apperr.Error that the caller may see (the call then counts as failed).
type Executor func(ctx context.Context, q *db.Queries, workspaceID uuid.UUID, args json.RawMessage) (any, error)

// Tool is one declaration.
type Tool struct {
	Name        string
	Description string
	Effect      policy.Effect
	// Schema is the JSON Schema of the arguments.
	Schema   json.RawMessage
	Contract Contract
	Execute  Executor

	compiled *jsonschema.Schema
}

// Registry holds the declarations by name, and the action classes they
// are classified into.
type Registry struct {
	byName  map[string]*Tool
	names   []string
	classes *policy.ClassRegistry
}

// NewRegistry checks each declaration (its contract, against the action
// classes) and compiles its schema; a bad declaration is an error naming
// the tool, which stops the server.
func NewRegistry(classes *policy.ClassRegistry, decls ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]*Tool{}, classes: classes}
	for _, d := range decls {
		if _, dup := r.byName[d.Name]; dup {
			return nil, fmt.Errorf("tools: %s is declared twice", d.Name)
		}
		switch d.Effect {
		case policy.EffectRead, policy.EffectMutate, policy.EffectDestructive:
		default:
			return nil, fmt.Errorf("tools: %s has unknown effect %q", d.Name, d.Effect)
		}
		if d.Execute == nil {
			return nil, fmt.Errorf("tools: %s has no executor", d.Name)
		}
		if err := d.settle(classes); err != nil {
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
		t := d
		r.byName[d.Name] = &t
		r.names = append(r.names, d.Name)
	}
	sort.Strings(r.names)
	return r, nil
}

// Get returns the tool of that name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Classes are the action classes the registry classifies calls into.
func (r *Registry) Classes() *policy.ClassRegistry { return r.classes }

// List returns every tool, by name.
func (r *Registry) List() []*Tool {
	out := make([]*Tool, len(r.names))
	for i, n := range r.names {
		out[i] = r.byName[n]
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
