package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The upstream's schema sits at #/anyOf/0 of the listed one: its
// document-relative pointers follow it there, while anchors, other
// documents' refs and a subschema with its own $id (its pointers are its
// own) are left alone; $schema moves to the root.
func TestOutputSchema_RebasesTheUpstreamsPointers(t *testing.T) {
	t.Parallel()
	got := outputSchema("files.stat", json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"a":{"$ref":"#/$defs/a"},"b":{"$ref":"#"},"c":{"$ref":"#anchor"},"d":{"$ref":"other.json#/x"},
		"e":{"$id":"e.json","properties":{"f":{"$ref":"#/$defs/f"}}},"g":{"allOf":[{"$ref":"#/properties/a"}]}}}`))
	b, _ := json.Marshal(got)
	var listed map[string]any
	json.Unmarshal(b, &listed)
	want := map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"$ref": "#/anyOf/0/$defs/a"}, "b": map[string]any{"$ref": "#/anyOf/0"}, "c": map[string]any{"$ref": "#anchor"},
		"d": map[string]any{"$ref": "other.json#/x"}, "e": map[string]any{"$id": "e.json", "properties": map[string]any{"f": map[string]any{"$ref": "#/$defs/f"}}},
		"g": map[string]any{"allOf": []any{map[string]any{"$ref": "#/anyOf/0/properties/a"}}}}}
	if alts := listed["anyOf"].([]any); len(alts) != 3 || !reflect.DeepEqual(alts[0], want) {
		t.Fatalf("the upstream's schema as listed:\n%s", b)
	}
	if listed["$schema"] != "http://json-schema.org/draft-07/schema#" || listed["type"] != "object" {
		t.Fatalf("the root: %s", b)
	}
}
