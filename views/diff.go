package views

import (
	"bytes"
	"encoding/json"
	"sort"
)

// ArgChange is one argument an owner or approver changed before a call
// ran: Kind is "changed", "added" or "removed"; Before and After are the
// values as short text (strings without quotes, anything else as JSON).
type ArgChange struct {
	Key, Kind, Before, After string
}

// ArgumentDiff compares the arguments an agent proposed with those that
// were approved, key by key, in key order. Equal documents (or either one
// missing or not a JSON object) give no changes; values compare by meaning,
// so {"a":1.0} equals {"a":1}.
func ArgumentDiff(proposed, applied []byte) []ArgChange {
	if len(bytes.TrimSpace(proposed)) == 0 || len(bytes.TrimSpace(applied)) == 0 {
		return nil
	}
	var before, after map[string]json.RawMessage
	if json.Unmarshal(proposed, &before) != nil || json.Unmarshal(applied, &after) != nil || before == nil || after == nil {
		return nil
	}
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []ArgChange
	for _, k := range keys {
		b, inBefore := before[k]
		a, inAfter := after[k]
		switch {
		case !inAfter:
			out = append(out, ArgChange{Key: k, Kind: "removed", Before: argText(b)})
		case !inBefore:
			out = append(out, ArgChange{Key: k, Kind: "added", After: argText(a)})
		case !sameJSON(b, a):
			bt, at := argText(b), argText(a)
			if bt == at { // "10" and 10: show the quotes that differ
				bt, at = compact(b), compact(a)
			}
			out = append(out, ArgChange{Key: k, Kind: "changed", Before: bt, After: at})
		}
	}
	return out
}

// sameJSON compares two JSON values by meaning (key order and number
// spelling aside).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// argText is a value as a diff shows it: a string as itself, anything else
// as compact JSON.
func argText(v json.RawMessage) string {
	var s string
	if t := bytes.TrimSpace(v); len(t) > 0 && t[0] == '"' && json.Unmarshal(t, &s) == nil {
		return s
	}
	return compact(v)
}

func compact(v json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return buf.String()
	}
	return string(v)
}
