package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Decode checks data with Check, then decodes it into v with encoding/json,
// refusing fields v does not declare when disallowUnknown is set.
//
// A document v cannot hold (a wrong type, an unknown field, a value an
// UnmarshalJSON method refuses) is an *Error too, with a Reason that names
// JSON types, never Go ones; Unwrap gives the decoder's own error. Path is
// what encoding/json knows: the struct field path for a wrong type, ""
// for an unknown field (the Reason names it). An invalid v (nil, not a
// pointer) is a programming error and comes back as is.
func Decode(data []byte, v any, l Limits, disallowUnknown bool) error {
	if err := Check(data, l); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if disallowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

func decodeError(err error) error {
	var invalid *json.InvalidUnmarshalError
	if errors.As(err, &invalid) {
		return fmt.Errorf("strictjson: decode: %w", err)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return &Error{
			Path:   typ.Field,
			Reason: fmt.Sprintf("wrong type: want %s, got %s", jsonKind(typ.Type), typ.Value),
			Offset: int(typ.Offset),
			cause:  err,
		}
	}
	// encoding/json has no type for this one; its text is stable since Go 1.10.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, uerr := strconv.Unquote(name); uerr == nil {
			return &Error{Reason: fmt.Sprintf("unknown field %s", quoteShort([]byte(unq))), cause: err}
		}
	}
	return &Error{Reason: "the value is not acceptable here", cause: err}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "base64 string"
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a value"
}
