package trust

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"unicode/utf8"
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
// (so key order and spacing never count). Both documents are flattened to
// leaves (a path to a scalar; an empty object or array is a leaf too). Each
// leaf of the union counts 1 when it was added, removed or changed type or
// value, except a string changed into another string, which counts the
// share of its characters that changed: what is left once the common
// prefix and suffix are set aside, over the longer string's length. The
// distance is the mean over the union's leaves. Documents that are not JSON
// are entirely different (1), unless they are byte for byte the same (0).
func EditDistance(before, after json.RawMessage) float64 {
	var a, b any
	if json.Unmarshal(before, &a) != nil || json.Unmarshal(after, &b) != nil {
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
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Strings(keys) // a deterministic sum
	total := 0.0
	for _, p := range keys {
		x, okx := la[p]
		y, oky := lb[p]
		switch {
		case !okx || !oky:
			total++
		default:
			total += leafChange(x, y)
		}
	}
	return total / float64(len(keys))
}

func leafChange(x, y any) float64 {
	sx, xs := x.(string)
	sy, ys := y.(string)
	if xs && ys {
		return stringChange(sx, sy)
	}
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	if bytes.Equal(bx, by) {
		return 0
	}
	return 1
}

// stringChange is the share of characters that changed between two
// strings, after their common prefix and suffix.
func stringChange(a, b string) float64 {
	if a == b {
		return 0
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
	return float64(n-pre-suf) / float64(n)
}

// flatten writes the leaves of v under prefix into out.
func flatten(prefix string, v any, out map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			out[prefix] = x
			return
		}
		for k, e := range x {
			flatten(prefix+"/"+escapeKey(k), e, out)
		}
	case []any:
		if len(x) == 0 {
			out[prefix] = x
			return
		}
		for i, e := range x {
			flatten(prefix+"/"+strconv.Itoa(i), e, out)
		}
	default:
		out[prefix] = v
	}
}

// escapeKey keeps object keys apart from path separators (JSON Pointer).
func escapeKey(k string) string {
	if !utf8.ValidString(k) {
		return k
	}
	var b []byte
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, k[i])
		}
	}
	return string(b)
}
