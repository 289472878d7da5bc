// Package strictjson checks untrusted JSON before anything decodes it or
// stores it. encoding/json is lenient where PostgreSQL is not: it replaces
// invalid UTF-8 and lone surrogates with U+FFFD, keeps the last of two
// duplicate keys and decodes NUL, which jsonb cannot hold. Check refuses all
// of that, and every other deviation from RFC 8259, in one pass over the
// bytes, naming the field and the offset.
package strictjson

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Defaults that a zero Limits field takes.
const (
	DefaultMaxDepth     = 32
	DefaultMaxNumberLen = 64
)

// Limits bound a document. Zero (or negative) values take the defaults.
type Limits struct {
	MaxDepth     int // nesting of objects and arrays; the top-level container is depth 1
	MaxNumberLen int // characters in one number literal, sign and exponent included
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxNumberLen <= 0 {
		l.MaxNumberLen = DefaultMaxNumberLen
	}
	return l
}

// Error says what is wrong with a document and where.
//
// Path is the field in dotted form: object keys as decoded, array indices as
// numbers ("arguments.keys.3"); "" is the document itself. A problem inside a
// key, or after a member's value, is reported on the enclosing object; a
// duplicate key, or a problem between a key and its value, on the member the
// key names. Keys are not escaped, so a key holding "." reads as two, and
// Path may hold any valid UTF-8: quote it when showing it, as Error does.
//
// Reason is a short sentence that quotes nothing from the document
// unescaped, so it is safe to show. Offset is the byte offset of the
// problem in the document.
type Error struct {
	Path   string
	Reason string
	Offset int

	cause error // the decoder's error, for Decode failures it could not name
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("strictjson: %s (offset %d)", e.Reason, e.Offset)
	}
	return fmt.Sprintf("strictjson: %q: %s (offset %d)", e.Path, e.Reason, e.Offset)
}

// Unwrap returns the underlying decoder error, if any.
func (e *Error) Unwrap() error { return e.cause }

// Check validates data as exactly one JSON value (RFC 8259), surrounded by
// nothing but whitespace, and within l. It returns nil or an *Error.
//
// Beyond the grammar it refuses invalid UTF-8 anywhere, NUL (raw or
// \u0000), unpaired surrogate escapes, duplicate keys (compared decoded),
// nesting deeper than l.MaxDepth, numbers longer than l.MaxNumberLen and
// numbers beyond the float64 range. It runs in time linear in len(data) and
// never panics.
func Check(data []byte, l Limits) error {
	b := new(buffers) // one allocation, without pointers, for a typical body
	s := scanner{data: data, lim: l.withDefaults(), stack: b.stack[:0], keys: b.keys[:0], arena: b.arena[:0]}
	if err := s.run(); err != nil {
		return err
	}
	return nil
}

// keysInline is how many keys of one object are compared pairwise before
// the object switches to a map: small objects stay allocation-free, large
// ones stay linear.
const keysInline = 16

// span is a decoded key: a range of scanner.arena.
type span struct{ from, to int }

// frame is one open object or array.
type frame struct {
	object    bool
	member    bool // key (object) or index (array) names the value being scanned
	index     int
	key       span
	keysFrom  int // this object's keys are scanner.keys[keysFrom:]
	arenaFrom int // and their bytes scanner.arena[arenaFrom:]
	seen      int // past keysInline keys: 1 + the index of its map in scanner.seen
}

// buffers back the scanner's slices for a typical body.
type buffers struct {
	stack [16]frame
	keys  [32]span
	arena [256]byte
}

type scanner struct {
	data  []byte
	pos   int
	lim   Limits
	stack []frame
	keys  []span // keys of every open object, innermost last
	arena []byte // decoded keys of every open object
	seen  []map[string]struct{}
}

// Scanner states.
const (
	stateValue = iota // a value must start here
	stateKey          // an object key must start here
	stateAfter        // a value just ended
)

func (s *scanner) run() *Error {
	s.skipSpace()
	if s.pos == len(s.data) {
		return &Error{Reason: "the body is empty", Offset: s.pos}
	}
	state := stateValue
	for {
		switch state {
		case stateValue:
			next, err := s.value()
			if err != nil {
				return err
			}
			state = next
		case stateKey:
			if err := s.objectKey(); err != nil {
				return err
			}
			state = stateValue
		case stateAfter:
			if len(s.stack) == 0 {
				s.skipSpace()
				if s.pos != len(s.data) {
					return s.unexpected("only whitespace may follow the value")
				}
				return nil
			}
			next, err := s.afterMember()
			if err != nil {
				return err
			}
			state = next
		}
	}
}

// value scans a value, or opens a container, and says what comes next.
func (s *scanner) value() (int, *Error) {
	s.skipSpace()
	if s.pos == len(s.data) {
		return 0, s.fail(s.pos, "unexpected end of input; a value is missing")
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if len(s.stack) == s.lim.MaxDepth {
			return 0, s.fail(s.pos, fmt.Sprintf("nesting is deeper than %d levels", s.lim.MaxDepth))
		}
		s.pos++
		s.skipSpace()
		if c == '{' {
			s.stack = append(s.stack, frame{object: true, keysFrom: len(s.keys), arenaFrom: len(s.arena)})
			if s.pos < len(s.data) && s.data[s.pos] == '}' {
				s.pos++
				s.pop()
				return stateAfter, nil
			}
			return stateKey, nil
		}
		s.stack = append(s.stack, frame{member: true})
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			s.pop()
			return stateAfter, nil
		}
		return stateValue, nil
	case c == '"':
		return stateAfter, s.scanString(false)
	case c == '-' || (c >= '0' && c <= '9'):
		return stateAfter, s.scanNumber()
	case c == 't':
		return stateAfter, s.literal("true")
	case c == 'f':
		return stateAfter, s.literal("false")
	case c == 'n':
		return stateAfter, s.literal("null")
	}
	return 0, s.unexpected("expected a value")
}

// objectKey scans `"key" :` and checks the key is new to its object.
func (s *scanner) objectKey() *Error {
	s.skipSpace()
	if s.pos == len(s.data) {
		return s.fail(s.pos, "unexpected end of input; an object is not closed")
	}
	if s.data[s.pos] != '"' {
		return s.unexpected("expected a string key")
	}
	at := s.pos
	from := len(s.arena)
	if err := s.scanString(true); err != nil {
		return err
	}
	f := &s.stack[len(s.stack)-1]
	f.key, f.member = span{from, len(s.arena)}, true
	if s.duplicate(f) {
		return s.fail(at, fmt.Sprintf("duplicate key %s", quoteShort(s.arena[from:])))
	}
	s.skipSpace()
	if s.pos == len(s.data) {
		return s.fail(s.pos, "unexpected end of input; a ':' is missing")
	}
	if s.data[s.pos] != ':' {
		return s.unexpected("expected ':' after the key")
	}
	s.pos++
	return nil
}

// duplicate records f's current key and reports whether it was seen before.
func (s *scanner) duplicate(f *frame) bool {
	key := s.arena[f.key.from:f.key.to]
	if f.seen > 0 {
		seen := s.seen[f.seen-1]
		if _, ok := seen[string(key)]; ok {
			return true
		}
		seen[string(key)] = struct{}{}
		return false
	}
	mine := s.keys[f.keysFrom:]
	for _, k := range mine {
		if string(s.arena[k.from:k.to]) == string(key) {
			return true
		}
	}
	s.keys = append(s.keys, f.key)
	if len(mine)+1 == keysInline {
		// Only the innermost object adds keys, so maps stack like frames.
		seen := make(map[string]struct{}, 2*keysInline)
		for _, k := range s.keys[f.keysFrom:] {
			seen[string(s.arena[k.from:k.to])] = struct{}{}
		}
		s.seen = append(s.seen, seen)
		f.seen = len(s.seen)
	}
	return false
}

// afterMember expects a comma or the end of the innermost container.
func (s *scanner) afterMember() (int, *Error) {
	f := &s.stack[len(s.stack)-1]
	f.member = false
	s.skipSpace()
	if s.pos == len(s.data) {
		if f.object {
			return 0, s.fail(s.pos, "unexpected end of input; an object is not closed")
		}
		return 0, s.fail(s.pos, "unexpected end of input; an array is not closed")
	}
	c := s.data[s.pos]
	switch {
	case c == ',':
		s.pos++
		if f.object {
			return stateKey, nil
		}
		f.index++
		f.member = true
		return stateValue, nil
	case f.object && c == '}', !f.object && c == ']':
		s.pos++
		s.pop()
		return stateAfter, nil
	case f.object:
		return 0, s.unexpected("expected ',' or '}' after an object member")
	default:
		return 0, s.unexpected("expected ',' or ']' after an array element")
	}
}

func (s *scanner) pop() {
	f := s.stack[len(s.stack)-1]
	if f.object {
		s.keys = s.keys[:f.keysFrom]
		s.arena = s.arena[:f.arenaFrom]
		if f.seen > 0 {
			s.seen[f.seen-1] = nil
			s.seen = s.seen[:f.seen-1]
		}
	}
	s.stack = s.stack[:len(s.stack)-1]
}

// scanString scans the string whose opening quote is at s.pos. A key is
// decoded onto s.arena.
func (s *scanner) scanString(key bool) *Error {
	what := "string"
	if key {
		what = "key"
	}
	s.pos++
	for {
		start := s.pos
		for s.pos < len(s.data) {
			c := s.data[s.pos]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			s.pos++
		}
		if key {
			s.arena = append(s.arena, s.data[start:s.pos]...)
		}
		if s.pos == len(s.data) {
			return s.fail(s.pos, "unexpected end of input; a "+what+" is not closed")
		}
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			r, err := s.escape(what)
			if err != nil {
				return err
			}
			if key {
				s.arena = utf8.AppendRune(s.arena, r)
			}
		case c == 0:
			return s.fail(s.pos, what+" contains a NUL character")
		case c < 0x20:
			return s.fail(s.pos, fmt.Sprintf("%s contains a raw control character U+%04X; it must be escaped", what, c))
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				return s.fail(s.pos, fmt.Sprintf("%s contains invalid UTF-8 (byte 0x%02X)", what, c))
			}
			if key {
				s.arena = append(s.arena, s.data[s.pos:s.pos+size]...)
			}
			s.pos += size
		}
	}
}

// escape decodes the escape at s.pos, a surrogate pair as one rune.
func (s *scanner) escape(what string) (rune, *Error) {
	at := s.pos
	if at+1 == len(s.data) {
		return 0, s.fail(len(s.data), "unexpected end of input; a "+what+" is not closed")
	}
	switch c := s.data[at+1]; c {
	case '"', '\\', '/':
		s.pos += 2
		return rune(c), nil
	case 'b':
		s.pos += 2
		return '\b', nil
	case 'f':
		s.pos += 2
		return '\f', nil
	case 'n':
		s.pos += 2
		return '\n', nil
	case 'r':
		s.pos += 2
		return '\r', nil
	case 't':
		s.pos += 2
		return '\t', nil
	case 'u':
	default:
		return 0, s.fail(at, fmt.Sprintf("%s contains an invalid escape %q", what, []byte{'\\', c}))
	}
	r, ok := hex4(s.data[at+2:])
	if !ok {
		return 0, s.fail(at, what+` contains a \u escape without four hex digits`)
	}
	s.pos += 6
	switch {
	case r == 0:
		return 0, s.fail(at, what+` contains a NUL character (\u0000)`)
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, s.fail(at, fmt.Sprintf(`%s contains a lone low surrogate \u%04X with no high surrogate before it`, what, r))
	case r >= 0xD800 && r <= 0xDBFF:
		rest := s.data[s.pos:]
		if len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
			if lo, ok := hex4(rest[2:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				s.pos += 6
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
			}
		}
		return 0, s.fail(at, fmt.Sprintf(`%s contains a lone high surrogate \u%04X with no low surrogate after it`, what, r))
	}
	return r, nil
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and checks
// its length and range.
func (s *scanner) scanNumber() *Error {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos == len(s.data) || !isDigit(s.data[s.pos]):
		return s.fail(s.pos, "invalid number: a digit must follow '-'")
	case s.data[s.pos] == '0':
		s.pos++
		if s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			return s.fail(s.pos, "invalid number: a leading zero must stand alone")
		}
	default:
		s.digits()
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.fail(s.pos, "invalid number: a digit must follow '.'")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.fail(s.pos, "invalid number: a digit must follow the exponent")
		}
	}
	lit := s.data[start:s.pos]
	if len(lit) > s.lim.MaxNumberLen {
		return s.fail(start, fmt.Sprintf("number is longer than %d characters", s.lim.MaxNumberLen))
	}
	// The grammar above is a subset of ParseFloat's, so an error here is
	// ErrRange: the magnitude overflows float64. Underflow to 0 is no error.
	if _, err := strconv.ParseFloat(string(lit), 64); err != nil {
		return s.fail(start, "number is too large for a 64-bit float")
	}
	return nil
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
	return s.pos - start
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) literal(word string) *Error {
	rest := s.data[s.pos:]
	for i := 0; i < len(word); i++ {
		if i == len(rest) {
			return s.fail(len(s.data), "unexpected end of input in "+word)
		}
		if rest[i] != word[i] {
			return s.fail(s.pos, "invalid literal; expected "+word)
		}
	}
	s.pos += len(word)
	return nil
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// unexpected reports the character at s.pos, which is not what the grammar
// wants there.
func (s *scanner) unexpected(want string) *Error {
	c := s.data[s.pos]
	switch {
	case c == 0:
		return s.fail(s.pos, want+"; found a NUL character")
	case c < 0x20 || c == 0x7F:
		return s.fail(s.pos, fmt.Sprintf("%s; found control character U+%04X", want, c))
	case c < utf8.RuneSelf:
		return s.fail(s.pos, fmt.Sprintf("%s; found %q", want, rune(c)))
	}
	r, size := utf8.DecodeRune(s.data[s.pos:])
	if r == utf8.RuneError && size <= 1 {
		return s.fail(s.pos, fmt.Sprintf("invalid UTF-8 (byte 0x%02X)", c))
	}
	return s.fail(s.pos, fmt.Sprintf("%s; found U+%04X", want, r))
}

// fail builds the error at offset, on the path of the value being scanned.
func (s *scanner) fail(offset int, reason string) *Error {
	var b strings.Builder
	for i, f := range s.stack {
		if !f.member {
			break
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if f.object {
			b.Write(s.arena[f.key.from:f.key.to])
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return &Error{Path: b.String(), Reason: reason, Offset: offset}
}

// quoteShort quotes a decoded key for a Reason, cut to a readable length.
func quoteShort(key []byte) string {
	const max = 64
	if len(key) <= max {
		return strconv.Quote(string(key))
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return strconv.Quote(string(key[:cut])) + "…"
}
