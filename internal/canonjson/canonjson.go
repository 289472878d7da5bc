// Package canonjson writes JSON in its RFC 8785 canonical form (JCS):
// object members sorted by the UTF-16 code units of their names, no
// insignificant white space, strings with the fewest escapes, numbers in
// ECMAScript's shortest form. It reads JSON text directly into the
// canonical bytes, in one pass, without building a tree of Go values —
// the receipt sequencer canonicalises every receipt it chains.
//
// Input that is not I-JSON (RFC 7493) is refused: invalid UTF-8, lone
// surrogates, duplicate member names, numbers a float64 cannot hold,
// trailing data.
package canonjson

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting (the receipts hold documents Gatehouse wrote).
const maxDepth = 1000

// Transform returns the canonical form of the JSON text in.
func Transform(in []byte) ([]byte, error) {
	return Append(make([]byte, 0, len(in)), in)
}

// Append appends the canonical form of the JSON text in to dst and
// returns the extended buffer (dst as it was, on an error). Its working
// buffers are reused from call to call: canonicalising into a buffer of
// the caller's (a verification hashes every receipt) allocates nothing.
func Append(dst, in []byte) ([]byte, error) {
	p := parsers.Get().(*parser)
	defer p.release()
	p.in, p.pos, p.out = in, 0, dst
	p.skipSpace()
	if err := p.value(0); err != nil {
		return dst, err
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return dst, p.errorf("data after the top-level value")
	}
	return p.out, nil
}

// parsers are idle parsers with their working buffers.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// maxKept is the largest working buffer a parser keeps for the next
// document.
const maxKept = 64 << 10

// release returns p to parsers, holding on to nothing of the document it
// read or wrote.
func (p *parser) release() {
	clear(p.members[:cap(p.members)]) // names point into the input
	p.in, p.out, p.pos, p.members = nil, nil, 0, p.members[:0]
	if cap(p.scratch) > maxKept {
		p.scratch = nil
	}
	if cap(p.esc) > maxKept {
		p.esc = nil
	}
	if cap(p.members) > maxKept/32 {
		p.members = nil
	}
	parsers.Put(p)
}

type parser struct {
	in      []byte
	pos     int
	out     []byte
	scratch []byte
	// members is a stack of the objects' members being written: an
	// object's are those from its base up (nested objects push theirs
	// above and pop them before their parent adds the next).
	members []member
	// esc holds a string value's unescaped bytes (str's slow path).
	esc []byte
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("canonjson: offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) error {
	if depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	if p.pos >= len(p.in) {
		return p.errorf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, plain, err := p.str(false)
		if err != nil {
			return err
		}
		p.out = appendStr(p.out, s, plain)
		return nil
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return p.errorf("unexpected character %q", c)
	}
}

func (p *parser) literal(word string) error {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return p.errorf("invalid literal")
	}
	p.pos += len(word)
	p.out = append(p.out, word...)
	return nil
}

// member is one written member of an object: its name and where its
// canonical bytes ("name":value) sit in out.
type member struct {
	name       []byte
	start, end int
}

func (p *parser) object(depth int) error {
	p.pos++ // {
	p.out = append(p.out, '{')
	base := len(p.out)
	mbase := len(p.members)
	defer func() { p.members = p.members[:mbase] }()
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '}')
		return nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.errorf("expected a member name")
		}
		name, plain, err := p.str(true)
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.errorf("expected ':'")
		}
		p.pos++
		p.skipSpace()
		if len(p.members) > mbase {
			p.out = append(p.out, ',')
		}
		start := len(p.out)
		p.out = appendStr(p.out, name, plain)
		p.out = append(p.out, ':')
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.members = append(p.members, member{name: name, start: start, end: len(p.out)})
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.errorf("unexpected end of input in an object")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != '}' {
			return p.errorf("expected ',' or '}'")
		}
		p.pos++
		break
	}
	members := p.members[mbase:]
	sorted := sortMembers(members)
	for i := 1; i < len(members); i++ {
		if bytes.Equal(members[i].name, members[i-1].name) {
			return p.errorf("duplicate member name %q", members[i].name)
		}
	}
	if !sorted {
		// Lay the members out again in order, through the scratch buffer.
		p.scratch = append(p.scratch[:0], p.out[base:]...)
		p.out = p.out[:base]
		for i, m := range members {
			if i > 0 {
				p.out = append(p.out, ',')
			}
			p.out = append(p.out, p.scratch[m.start-base:m.end-base]...)
		}
	}
	p.out = append(p.out, '}')
	return nil
}

// sortMembers puts members in JCS order and reports whether they were in
// it already. An object's few members (a receipt's content has about
// fifteen) are sorted in place by insertion, which costs a sorted list
// one comparison a member; many, by slices.SortFunc.
func sortMembers(members []member) (sorted bool) {
	if len(members) > 24 {
		cmp := func(a, b member) int { return compareUTF16(a.name, b.name) }
		if slices.IsSortedFunc(members, cmp) {
			return true
		}
		slices.SortFunc(members, cmp)
		return false
	}
	sorted = true
	for i := 1; i < len(members); i++ {
		for j := i; j > 0 && compareUTF16(members[j].name, members[j-1].name) < 0; j-- {
			members[j], members[j-1] = members[j-1], members[j]
			sorted = false
		}
	}
	return sorted
}

func (p *parser) array(depth int) error {
	p.pos++ // [
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for first := true; ; first = false {
		if !first {
			p.out = append(p.out, ',')
		}
		p.skipSpace()
		if err := p.value(depth + 1); err != nil {
			return err
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.errorf("unexpected end of input in an array")
		}
		if p.in[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.in[p.pos] != ']' {
			return p.errorf("expected ',' or ']'")
		}
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
}

// str reads a JSON string at pos and returns its value: the input's own
// bytes when it has no escapes; else, unescaped, a buffer of its own for
// a member name (kept until its object is written: keep) or the parser's
// buffer, valid until the next string, for a value. plain says the value
// has nothing the canonical form escapes (it had no escapes, so no quote,
// backslash or control character): it is written as it is.
func (p *parser) str(keep bool) (s []byte, plain bool, err error) {
	p.pos++ // "
	start := p.pos
	// Fast path: no escapes. Only a string with a byte past ASCII needs
	// its UTF-8 checked.
	ascii := true
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := p.in[start:p.pos:p.pos]
			if !ascii && !utf8.Valid(s) {
				return nil, false, p.errorf("invalid UTF-8 in a string")
			}
			p.pos++
			return s, true, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, false, p.errorf("control character in a string")
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		p.pos++
	}
	buf := append(p.esc[:0], p.in[start:p.pos]...)
	if keep {
		buf = append([]byte(nil), p.in[start:p.pos]...)
	}
	defer func() {
		if !keep {
			p.esc = buf[:0]
		}
	}()
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(buf) {
				return nil, false, p.errorf("invalid UTF-8 in a string")
			}
			return buf, false, nil
		case c < 0x20:
			return nil, false, p.errorf("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.in) {
			break
		}
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false, p.errorf("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
					return nil, false, p.errorf("lone surrogate in a string")
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
					return nil, false, p.errorf("lone surrogate in a string")
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, false, p.errorf("invalid escape \\%c", e)
		}
	}
	return nil, false, p.errorf("unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if len(p.in)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

func (p *parser) number() error {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return p.errorf("invalid number")
	}
	if p.in[intStart] == '0' && p.pos-intStart > 1 {
		return p.errorf("invalid number: leading zero")
	}
	if n := p.pos - intStart; n <= 15 && (p.pos == len(p.in) || (p.in[p.pos] != '.' && p.in[p.pos] != 'e' && p.in[p.pos] != 'E')) {
		// An integer of at most 15 digits is exact in a float64 and
		// ECMAScript writes it as it is (without a leading zero, which
		// is refused above); -0 is "0".
		if n == 1 && p.in[intStart] == '0' {
			p.out = append(p.out, '0')
		} else {
			p.out = append(p.out, p.in[start:p.pos]...)
		}
		return nil
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return p.errorf("invalid number")
		}
	}
	f, err := strconv.ParseFloat(string(p.in[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return p.errorf("number %s does not fit a float64", p.in[start:p.pos])
	}
	p.out = AppendNumber(p.out, f)
	return nil
}

// AppendNumber appends f as ECMAScript's Number.prototype.toString writes
// it (RFC 8785 §3.2.2.3): the shortest digits that read back as f, in
// plain notation for exponents from -6 to 20 and in exponent notation
// otherwise; -0 is "0".
func AppendNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // d[.ddd]e±XX
	mant, exp, _ := cutByte(e, 'e')
	x, _ := strconv.Atoi(string(exp))
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		b = append(b, digits...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, digits[:n]...)
		b = append(b, '.')
		b = append(b, digits[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for range -n {
			b = append(b, '0')
		}
		b = append(b, digits...)
	default:
		b = append(b, digits[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

func cutByte(s []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range s {
		if c == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, nil, false
}

// AppendString appends s to dst as a JSON string in its canonical form
// (RFC 8785: only '"', '\\' and the control characters escaped). A byte
// of s that is not part of valid UTF-8 is written as U+FFFD, as
// encoding/json writes it.
func AppendString(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendString(dst, s)
	}
	valid := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			valid = utf8.AppendRune(valid, utf8.RuneError)
		} else {
			valid = append(valid, s[i:i+n]...)
		}
		i += n
	}
	return appendString(dst, valid)
}

// appendStr writes a string str read: as it is between quotes when plain,
// else with appendString's escapes.
func appendStr(b, s []byte, plain bool) []byte {
	if !plain {
		return appendString(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendString writes s with only the escapes JCS requires: the quote,
// the backslash, and control characters (\b \t \n \f \r by name, the rest
// as \u00xx).
func appendString[S string | []byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// compareUTF16 orders two strings by their UTF-16 code units, as JCS
// sorts member names. UTF-8 byte order is code point order, which agrees
// with UTF-16 order except between supplementary characters (surrogate
// pairs, 0xD800…) and U+E000…U+FFFF.
func compareUTF16(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] < utf8.RuneSelf && b[0] < utf8.RuneSelf {
			if a[0] != b[0] {
				return int(a[0]) - int(b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb {
			return cmpUnit(firstUnit(ra), firstUnit(rb), ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

func cmpUnit(ua, ub, ra, rb rune) int {
	if ua != ub {
		if ua < ub {
			return -1
		}
		return 1
	}
	// Same high surrogate: the low surrogates order like the runes.
	if ra < rb {
		return -1
	}
	return 1
}
