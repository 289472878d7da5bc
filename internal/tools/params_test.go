package tools

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParams_RequiredFirstWithTypesAndHints(t *testing.T) {
	tool := &Tool{Schema: json.RawMessage(`{"type": "object", "required": ["b", "a"], "properties": {
		"z": {"type": "integer", "minimum": 1, "maximum": 10},
		"a": {"type": "string", "minLength": 1, "maxLength": 200, "description": "first"},
		"b": {"type": "array", "items": {"type": "string"}},
		"c": {"type": "string", "enum": ["x", "y"], "maxLength": 5}}}`)}
	got := tool.Params()
	names := make([]string, len(got))
	for i, p := range got {
		names[i] = p.Name
	}
	if want := []string{"a", "b", "c", "z"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	checks := []struct {
		got, want Param
	}{
		{got[0], Param{Name: "a", Type: "string", Required: true, Description: "first", Hint: "1–200 characters"}},
		{got[1], Param{Name: "b", Type: "array", Required: true, ItemType: "string"}},
		{got[2], Param{Name: "c", Type: "string", Hint: "up to 5 characters", Enum: []string{"x", "y"}}},
		{got[3], Param{Name: "z", Type: "integer", Hint: "at least 1, at most 10"}},
	}
	for _, c := range checks {
		if c.got.Name != c.want.Name || c.got.Type != c.want.Type || c.got.Required != c.want.Required ||
			c.got.Description != c.want.Description || c.got.Hint != c.want.Hint || c.got.ItemType != c.want.ItemType ||
			!slices.Equal(c.got.Enum, c.want.Enum) {
			t.Errorf("got %+v, want %+v", c.got, c.want)
		}
	}
}

func TestBuiltin_EveryToolDescribesEveryArgument(t *testing.T) {
	registry, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range registry.List() {
		params := tool.Params()
		if len(params) == 0 {
			t.Errorf("%s has no arguments listed", tool.Name)
		}
		for _, p := range params {
			if p.Type == "" || p.Description == "" {
				t.Errorf("%s.%s: type %q, description %q", tool.Name, p.Name, p.Type, p.Description)
			}
		}
	}
}
