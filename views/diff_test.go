package views

import (
	"reflect"
	"testing"
)

func TestArgumentDiff(t *testing.T) {
	cases := []struct {
		name              string
		proposed, applied string
		want              []ArgChange
	}{
		{"unchanged", `{"a": 1, "b": "x"}`, `{"b": "x", "a": 1}`, nil},
		{"numbers by meaning", `{"a": 1.0}`, `{"a": 1}`, nil},
		{"not edited", `{"a": 1}`, ``, nil},
		{"no proposal", ``, `{"a": 1}`, nil},
		{"not objects", `[1]`, `[2]`, nil},
		{"changed string", `{"key": "old"}`, `{"key": "new"}`, []ArgChange{{Key: "key", Kind: "changed", Before: "old", After: "new"}}},
		{"added and removed", `{"a": 1, "b": true}`, `{"a": 1, "c": null}`, []ArgChange{
			{Key: "b", Kind: "removed", Before: "true"},
			{Key: "c", Kind: "added", After: "null"},
		}},
		{"nested value as compact JSON", `{"value": {"tier": "gold", "n": [1, 2]}}`, `{"value": {"tier": "silver", "n": [1, 2]}}`, []ArgChange{
			{Key: "value", Kind: "changed", Before: `{"tier":"gold","n":[1,2]}`, After: `{"tier":"silver","n":[1,2]}`},
		}},
		{"object key order is not a change", `{"value": {"x": 1, "y": 2}}`, `{"value": {"y": 2, "x": 1}}`, nil},
		{"sorted by key", `{"z": 1, "a": 1}`, `{"z": 2, "a": 2}`, []ArgChange{
			{Key: "a", Kind: "changed", Before: "1", After: "2"},
			{Key: "z", Kind: "changed", Before: "1", After: "2"},
		}},
		{"string to number", `{"amount": "10"}`, `{"amount": 10}`, []ArgChange{{Key: "amount", Kind: "changed", Before: `"10"`, After: "10"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ArgumentDiff([]byte(c.proposed), []byte(c.applied))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ArgumentDiff(%s, %s) = %#v, want %#v", c.proposed, c.applied, got, c.want)
			}
		})
	}
}
