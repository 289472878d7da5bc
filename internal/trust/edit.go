package trust

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"
	"strings"
)

// Edit thresholds on the edit distance (see EditDistance).
const (
	MinorEditMax = 0.20 // up to this much changed: a minor edit
	EditedMax    = 0.50 // up to this much: edited; beyond, a heavy rewrite
)

// EditLabel is the judgment an edit before apply expresses: approved when
// nothing changed, then minor_edit, edited or heavy_rewrite by
// EditDistance.
func EditLabel(before, after json.RawMessage) (Label, float64) {
	d := EditDistance(before, after)
	switch {
	case d == 0:
		return LabelApproved, d
	case d <= MinorEditMax:
		return LabelMinorEdit, d
	case d <= EditedMax:
		return LabelEdited, d
	}
	return LabelHeavyRewrite, d
}

// EditDistance measures how much of a call's arguments an edit changed,
// from 0 (the same document) to 1 (nothing kept), on their decoded JSON
// (so key order and spacing never count, nor how a number is written:
// 1, 1.0 and 10e-1 are one number, compared exactly, never through a
// float64 that would round two large integers together). Both documents
// are flattened to leaves (a path to a scalar; an empty object or array is
// a leaf too; a path tells an object's key from an array's index). Each
// leaf of the union counts 1 when it was added, removed or changed type or
// value, except a string changed into another string, which counts the
// share of its characters that changed: what is left once the common
// prefix and suffix are set aside, over the longer string's length. The
// distance is the mean over the union's leaves, computed exactly and
// rounded once, so a mean of exactly 0.20 is MinorEditMax. Documents that
// are not JSON are entirely different (1), unless they are byte for byte
// the same (0).
func EditDistance(before, after json.RawMessage) float64 {
	a, errA := decodeJSON(before)
	b, errB := decodeJSON(after)
	if errA != nil || errB != nil {
		if bytes.Equal(before, after) {
			return 0
		}
		return 1
	}
	la, lb := map[string]any{}, map[string]any{}
	flatten("", a, la)
	flatten("", b, lb)
	paths := map[string]bool{}
	for p := range la {
		paths[p] = true
	}
	for p := range lb {
		paths[p] = true
	}
	if len(paths) == 0 {
		return 0
	}
	total := new(big.Rat)
	for p := range paths {
		x, okx := la[p]
		y, oky := lb[p]
		switch {
		case !okx || !oky:
			total.Add(total, big.NewRat(1, 1))
		default:
			total.Add(total, leafChange(x, y))
		}
	}
	d, _ := total.Quo(total, big.NewRat(int64(len(paths)), 1)).Float64()
	return d
}

// decodeJSON decodes one JSON document, keeping numbers as written.
func decodeJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trust: data after the JSON document")
	}
	return v, nil
}

// leafChange is how much one leaf changed, from 0 to 1.
func leafChange(x, y any) *big.Rat {
	sx, xs := x.(string)
	sy, ys := y.(string)
	if xs && ys {
		return stringChange(sx, sy)
	}
	nx, xn := x.(json.Number)
	ny, yn := y.(json.Number)
	if xn && yn {
		if sameNumber(nx, ny) {
			return new(big.Rat)
		}
		return big.NewRat(1, 1)
	}
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	if bytes.Equal(bx, by) {
		return new(big.Rat)
	}
	return big.NewRat(1, 1)
}

// sameNumber reports whether two JSON numbers are the same number, however
// written, exactly.
func sameNumber(x, y json.Number) bool {
	if x == y {
		return true
	}
	cx, okx := canonicalNumber(string(x))
	cy, oky := canonicalNumber(string(y))
	return okx && oky && cx == cy
}

// canonicalNumber writes a JSON number as sign, significant digits and
// exponent (12.50e1 → "125e0", -0 → "0"), exactly; false when the
// exponent is out of any reasonable range.
func canonicalNumber(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > 1e9 || e < -1e9 {
			return "", false
		}
		exp = e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if trimmed == "" {
		return "0", true
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(exp), true
}

// stringChange is the share of characters that changed between two
// strings, after their common prefix and suffix.
func stringChange(a, b string) *big.Rat {
	if a == b {
		return new(big.Rat)
	}
	ra, rb := []rune(a), []rune(b)
	n := max(len(ra), len(rb))
	pre := 0
	for pre < len(ra) && pre < len(rb) && ra[pre] == rb[pre] {
		pre++
	}
	suf := 0
	for suf < len(ra)-pre && suf < len(rb)-pre && ra[len(ra)-1-suf] == rb[len(rb)-1-suf] {
		suf++
	}
	return big.NewRat(int64(n-pre-suf), int64(n))
}

// flatten writes the leaves of v under prefix into out. An object's key
// is written "/." + key and an array's index "/#" + index, so an array and
// an object with keys "0", "1"… never share a path.
func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = x
			return
		}
		for k, e := range x {
			flatten(prefix+"/."+escapeKey(k), e, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = x
			return
		}
		for i, e := range x {
			flatten(prefix+"/#"+strconv.Itoa(i), e, out)
		}
	default:
		out[prefix] = v
	}
}

// keyEscaper keeps object keys apart from path separators (JSON Pointer).
var keyEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeKey(k string) string { return keyEscaper.Replace(k) }
