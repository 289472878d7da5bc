package tools

import (
	"encoding/json"
	"testing"
)

// Pins kept before output schemas were pinned still match after the
// upgrade: a tool that declares no output schema hashes exactly as it
// did, so no unchanged tool is held.
func TestUpstreamTool_DefinitionHashOfAToolWithoutOutputSchemaIsUnchanged(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		u    UpstreamTool
		want string
	}{
		// Hashes computed by the definition before it had an outputSchema.
		"annotated, with a title": {UpstreamTool{Upstream: "files", Name: "greet", Title: "Greet", Description: "Say hello.",
			InputSchema: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`),
			Annotations: Annotations{ReadOnly: yes(), Destructive: no(), OpenWorld: no()}},
			"9370cca22f5f7144ddfe6e9150055eb7c437d800f8c3777fc2a2ecd388fd9379"},
		"bare": {UpstreamTool{Upstream: "files", Name: "read_file", Description: "Read a file.", InputSchema: []byte(`{"type":"object"}`)},
			"caf60f6d34713dfad5f512c5a3abdaa269af94a1fcc19730e739e728aa69de61"},
		"output schema null": {UpstreamTool{Upstream: "files", Name: "read_file", Description: "Read a file.", InputSchema: []byte(`{"type":"object"}`),
			OutputSchema: []byte(`null`)},
			"caf60f6d34713dfad5f512c5a3abdaa269af94a1fcc19730e739e728aa69de61"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := c.u.DefinitionHash()
			if err != nil || got != c.want {
				t.Fatalf("hash %s (%v), want %s", got, err, c.want)
			}
		})
	}
}

// The output schema is part of the pinned definition: declaring one, or
// changing it, changes the hash (the tool is held until an admin accepts
// it), key order does not, and a pin reads back with it.
func TestUpstreamTool_DefinitionHashPinsTheOutputSchema(t *testing.T) {
	t.Parallel()
	u := UpstreamTool{Upstream: "files", Name: "stat", Description: "Size of a file.", InputSchema: []byte(`{"type":"object"}`)}
	bare, _ := u.DefinitionHash()
	u.OutputSchema = []byte(`{"type":"object","properties":{"size":{"type":"integer"}},"required":["size"]}`)
	with, _ := u.DefinitionHash()
	u.OutputSchema = []byte(`{"required":["size"], "properties":{"size":{"type":"integer"}},"type":"object"}`)
	reordered, _ := u.DefinitionHash()
	u.OutputSchema = []byte(`{"type":"object","properties":{"size":{"type":"string"}},"required":["size"]}`)
	changed, _ := u.DefinitionHash()
	if bare == with || with != reordered || with == changed {
		t.Fatalf("hashes: without %s, with %s, reordered %s, changed %s", bare, with, reordered, changed)
	}

	def, err := u.Definition()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UpstreamToolFromDefinition("files", changed, def)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(got.OutputSchema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("read back the output schema %s (%v)", got.OutputSchema, err)
	}
}
