package mcp

import (
	"encoding/json"
	"strings"

	"github.com/gatehouse/gatehouse/internal/apperr"
)

// An upstream tool that declares an output schema is listed with it, so a
// client can check the upstream's structuredContent, which a call that ran
// carries through unchanged. But a call through Gatehouse may also be
// answered by Gatehouse itself: it waits for a person (under 2025-11-25 a
// result, not an error), or it was refused, failed or rejected; and those
// answers carry Gatehouse's own structuredContent. Clients check that too
// (the TypeScript SDK checks any structuredContent, error or not, and
// throws when it does not match), so the schema agents see is the
// upstream's or Gatehouse's answer, and nothing else.

// outputSchema is the output schema a tool is listed with: the upstream's
// own schema, or one of Gatehouse's answers about the call. The root has
// type "object", as the specification (and the TypeScript SDK's listing)
// requires.
func outputSchema(tool string, upstream json.RawMessage) map[string]any {
	var own map[string]any
	if err := json.Unmarshal(upstream, &own); err != nil || own == nil {
		own = map[string]any{"type": "object"}
	}
	schema := map[string]any{"type": "object"}
	// $schema belongs at the root of the document; $ref "#/…" pointers
	// are rebased to where the upstream's schema now sits.
	if v, ok := own["$schema"]; ok {
		schema["$schema"] = v
		delete(own, "$schema")
	}
	if _, ok := own["$id"]; !ok {
		rebaseRefs(own, "#/anyOf/0")
	}
	schema["anyOf"] = []any{own,
		map[string]any{
			"description": "Gatehouse's answer about the call instead of the tool's own result: it waits for a person (status pending or pending_approval, with where they decide), or it did not run (failed, rejected, expired).",
			"type":        "object",
			"required":    []any{"proposal_id", "status", "tool"},
			"properties": map[string]any{
				"proposal_id": map[string]any{"type": "string"},
				"status":      map[string]any{"type": "string"},
				"tool":        map[string]any{"const": tool},
			},
		},
		map[string]any{
			"description": "Gatehouse's refusal: the call was not made (code, and a message saying why).",
			"type":        "object",
			"required":    []any{"code"},
			"properties": map[string]any{
				"code": map[string]any{"enum": []any{apperr.EINVALID, apperr.EBADREQ, apperr.EUNAUTH, apperr.EFORBIDDEN, apperr.ENOTFOUND,
					apperr.ECONFLICT, apperr.EGONE, apperr.ERATELIMIT, apperr.EUNSUPPORTED, apperr.EINTERNAL}},
				"message": map[string]any{"type": "string"},
			},
		},
	}
	return schema
}

// rebaseRefs prefixes the document-relative JSON pointers in v's $ref and
// $dynamicRef ("#", "#/…") with base, down to a subschema with its own
// $id (whose pointers are relative to it).
func rebaseRefs(v any, base string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "$ref" || k == "$dynamicRef") && (s == "#" || strings.HasPrefix(s, "#/")) {
				x[k] = base + s[1:]
				continue
			}
			if m, ok := e.(map[string]any); ok {
				if _, has := m["$id"]; has {
					continue
				}
			}
			rebaseRefs(e, base)
		}
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				if _, has := m["$id"]; has {
					continue
				}
			}
			rebaseRefs(e, base)
		}
	}
}
