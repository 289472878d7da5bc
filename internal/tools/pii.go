package tools

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/gatehouse/gatehouse/internal/policy"
)

// Redacted replaces the value of a personal-data field where Gatehouse
// tells other systems about a call (the audit export).
const Redacted = "[redacted]"

// PIIFields are the personal-data fields of the tool named tool; for a
// tool it does not know (or ""), those of every tool, so that what cannot
// be attributed is redacted the strictest way.
func (r *Registry) PIIFields(tool string) []string {
	if t, ok := r.Get(tool); ok {
		return t.Contract.PIIFields
	}
	var all []string
	for _, t := range r.List() {
		for _, f := range t.Contract.PIIFields {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	slices.Sort(all)
	return all
}

// PIIRead is what a call read of personal data: the names of the tool's
// personal-data fields that its arguments or its result hold, at any
// depth, sorted; never their values. Nil when it names none.
func (t *Tool) PIIRead(args, result json.RawMessage) []string {
	fields := t.Contract.PIIFields
	if len(fields) == 0 {
		return nil
	}
	var found []string
	for _, raw := range []json.RawMessage{args, result} {
		// Decoded only when a field's name is in it: a read on the call
		// path pays a scan of its bytes, not a decode, for nothing.
		if !slices.ContainsFunc(fields, func(f string) bool { return bytes.Contains(raw, []byte(`"`+f+`"`)) }) {
			continue
		}
		var v any
		if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
			continue
		}
		walkKeys(v, func(k string) {
			if slices.Contains(fields, k) && !slices.Contains(found, k) {
				found = append(found, k)
			}
		})
	}
	slices.Sort(found)
	return found
}

func walkKeys(v any, see func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			see(k)
			walkKeys(e, see)
		}
	case []any:
		for _, e := range v {
			walkKeys(e, see)
		}
	}
}

// RedactPII is a JSON value with the value of every field named in fields,
// at any depth, replaced by Redacted. A value that is not JSON is
// returned as Redacted whole: it cannot be checked.
func RedactPII(raw json.RawMessage, fields []string) json.RawMessage {
	if len(fields) == 0 || len(raw) == 0 {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	changed := false
	v = redact(v, fields, &changed)
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`"` + Redacted + `"`)
	}
	return out
}

func redact(v any, fields []string, changed *bool) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if slices.Contains(fields, k) {
				v[k] = Redacted
				*changed = true
				continue
			}
			v[k] = redact(e, fields, changed)
		}
	case []any:
		for i, e := range v {
			v[i] = redact(e, fields, changed)
		}
	}
	return v
}

// MarkPIIRead records on a read's audit row (its data) what it read of
// personal data: pii_read, the names PIIRead finds. A call that is not a
// read, or read none, leaves data as it is.
func MarkPIIRead(data map[string]any, t *Tool, args, result json.RawMessage) {
	if t.Contract.Authority != policy.AuthorityRead {
		return
	}
	if read := t.PIIRead(args, result); len(read) > 0 {
		data["pii_read"] = read
	}
}
