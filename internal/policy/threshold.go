package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// fieldPath is a dotted path into a call's arguments: "amount",
// "payee.account".
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// countField is "count(path)", the length of the array at path.
var countField = regexp.MustCompile(`^count\(\s*([^()\s]+)\s*\)$`)

// thresholdOps lists the comparison operators, two-character ones first so
// ">=" is not read as ">".
var thresholdOps = []string{">=", "<=", "==", ">", "<"}

// Threshold is a contract's human-gating threshold, such as
// "amount > 10000" or "count(keys) > 50". Field is a dotted path into the
// arguments, or count(path) for the length of the array at path.
type Threshold struct {
	Field string
	Op    string
	Value float64
}

// ParseThreshold parses "field op value", where op is one of > >= < <= ==
// and value is a finite number. Spaces around the operator are optional.
func ParseThreshold(s string) (Threshold, error) {
	i := strings.IndexAny(s, "<>=!")
	if i < 0 {
		return Threshold{}, fmt.Errorf("policy: threshold %q has no operator", s)
	}
	t := Threshold{Field: strings.TrimSpace(s[:i])}
	rest := s[i:]
	for _, op := range thresholdOps {
		if strings.HasPrefix(rest, op) {
			t.Op = op
			break
		}
	}
	if t.Op == "" {
		return Threshold{}, fmt.Errorf("policy: threshold %q has an unknown operator", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(rest[len(t.Op):]), 64)
	if err != nil {
		return Threshold{}, fmt.Errorf("policy: threshold %q: bad value: %w", s, err)
	}
	t.Value = v
	if m := countField.FindStringSubmatch(t.Field); m != nil {
		t.Field = "count(" + m[1] + ")"
	}
	if err := t.validate(); err != nil {
		return Threshold{}, err
	}
	return t, nil
}

// String is the threshold as ParseThreshold reads it.
func (t Threshold) String() string {
	return t.Field + " " + t.Op + " " + strconv.FormatFloat(t.Value, 'f', -1, 64)
}

func (t Threshold) validate() error {
	if _, _, ok := t.path(); !ok {
		return fmt.Errorf("policy: threshold field %q is not a field path or count(path)", t.Field)
	}
	if !slices.Contains(thresholdOps, t.Op) {
		return fmt.Errorf("policy: threshold operator %q is not one of > >= < <= ==", t.Op)
	}
	if math.IsNaN(t.Value) || math.IsInf(t.Value, 0) {
		return fmt.Errorf("policy: threshold value %v is not finite", t.Value)
	}
	return nil
}

// path is the field path and whether the threshold counts an array there.
func (t Threshold) path() (path string, count, ok bool) {
	if m := countField.FindStringSubmatch(t.Field); m != nil {
		return m[1], true, fieldPath.MatchString(m[1])
	}
	return t.Field, false, fieldPath.MatchString(t.Field)
}

// Exceeded reports whether args meet the threshold's condition. A missing
// field does not; a present one that is not a number (for count, not an
// array), null included, is an error, as is an invalid threshold, so a
// caller can fail closed. Numbers may be any Go number or json.Number.
func (t Threshold) Exceeded(args map[string]any) (bool, error) {
	if err := t.validate(); err != nil {
		return false, err
	}
	path, count, _ := t.path()
	v, ok := lookup(args, path)
	if !ok {
		return false, nil
	}
	x, err := number(v)
	if count {
		x, err = length(v)
	}
	if err != nil {
		return false, fmt.Errorf("policy: threshold %s: %w", t, err)
	}
	switch t.Op {
	case ">":
		return x > t.Value, nil
	case ">=":
		return x >= t.Value, nil
	case "<":
		return x < t.Value, nil
	case "<=":
		return x <= t.Value, nil
	}
	return x == t.Value, nil
}

// lookup walks a dotted path through nested objects.
func lookup(doc map[string]any, path string) (any, bool) {
	keys := strings.Split(path, ".")
	var v any = doc
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// number is v as a finite float64.
func number(v any) (float64, error) {
	var f float64
	rv := reflect.ValueOf(v)
	switch n := v.(type) {
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, fmt.Errorf("%q is not a number", n)
		}
	default:
		switch {
		case rv.CanFloat():
			f = rv.Float()
		case rv.CanInt():
			f = float64(rv.Int())
		case rv.CanUint():
			f = float64(rv.Uint())
		default:
			return 0, fmt.Errorf("%T is not a number", v)
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not a finite number", f)
	}
	return f, nil
}

// length is the length of the array or slice v.
func length(v any) (float64, error) {
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
		return 0, fmt.Errorf("%T is not an array", v)
	}
	return float64(rv.Len()), nil
}
