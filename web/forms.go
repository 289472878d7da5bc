package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/proposals"
	"github.com/gatehouse/gatehouse/internal/strictjson"
	"github.com/gatehouse/gatehouse/internal/tools"
	"github.com/gatehouse/gatehouse/views"
)

// Forms generated from a tool's JSON Schema: each top-level argument is an
// input named "arg.<name>". argumentsFromForm turns the inputs back into the
// arguments document; the tool's schema then validates it as it validates
// an agent's call, so a form cannot let through what the API would refuse.

const argPrefix = "arg."

// argumentLimits bound one argument typed as JSON: a body's limits, one
// level less for the arguments object that holds it.
var argumentLimits = strictjson.Limits{MaxDepth: jsonLimits.MaxDepth - 1, MaxNumberLen: jsonLimits.MaxNumberLen}

// hasArgumentFields reports whether a form carries generated inputs.
func hasArgumentFields(form url.Values) bool {
	for k := range form {
		if strings.HasPrefix(k, argPrefix) {
			return true
		}
	}
	return false
}

// argumentsFromForm builds the arguments: empty optional inputs are left
// out, numbers and booleans are typed, objects and arrays are parsed as
// JSON. An input that cannot be read is a field error.
func argumentsFromForm(tool *tools.Tool, form url.Values) (json.RawMessage, error) {
	args := map[string]any{}
	var fields []apperr.FieldError
	for _, p := range tool.Params() {
		raw, present := form[argPrefix+p.Name]
		v := ""
		if present && len(raw) > 0 {
			v = strings.TrimSpace(raw[0])
		}
		if p.Type == "boolean" {
			if present || p.Required {
				args[p.Name] = present && v != "" && v != "off" && v != "false"
			}
			continue
		}
		if v == "" {
			continue // the schema names a missing required argument
		}
		field := "arguments." + p.Name
		switch p.Type {
		case "integer":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				fields = append(fields, apperr.FieldError{Field: field, Message: "must be a whole number"})
				continue
			}
			args[p.Name] = n
		case "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				fields = append(fields, apperr.FieldError{Field: field, Message: "must be a number"})
				continue
			}
			args[p.Name] = n
		case "object", "array":
			// As strict as every JSON body: the service checks the whole
			// arguments document again (nested one deeper than this
			// input), but here the message can name the input.
			var doc any
			if err := strictjson.Decode([]byte(v), &doc, argumentLimits, false); err != nil {
				msg := "must be JSON (" + p.Type + ")"
				var se *strictjson.Error
				if errors.As(err, &se) && json.Valid([]byte(v)) {
					msg = "must be acceptable JSON (" + p.Type + "): " + se.Reason
				}
				fields = append(fields, apperr.FieldError{Field: field, Message: msg})
				continue
			}
			args[p.Name] = doc
		default:
			args[p.Name] = v
		}
	}
	if len(fields) > 0 {
		return nil, apperr.Invalid("Some arguments could not be read.", fields...)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, apperr.Invalid("Some arguments could not be read.", apperr.FieldError{Field: "arguments", Message: "could not be encoded as JSON"})
	}
	// What no JSON body could carry (a NUL in a text input, say) is refused
	// here as the API would refuse it.
	if err := strictjson.Check(b, strictjson.Limits{}); err != nil {
		return nil, proposals.ArgumentsError(err)
	}
	return b, nil
}

// formFields renders the tool's arguments as inputs, filled from a JSON
// document (the proposal's arguments) and marked with field errors.
func formFields(tool *tools.Tool, args json.RawMessage, err error) []views.Field {
	values := map[string]json.RawMessage{}
	if len(args) > 0 {
		_ = json.Unmarshal(args, &values)
	}
	return fieldsWith(tool, func(name string) (string, bool) {
		raw, ok := values[name]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, s != ""
		}
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			return strconv.FormatBool(b), b
		}
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") != nil {
			return string(raw), true
		}
		return buf.String(), true
	}, err)
}

// formFieldsFromInput renders the inputs as the person typed them.
func formFieldsFromInput(tool *tools.Tool, form url.Values, err error) []views.Field {
	return fieldsWith(tool, func(name string) (string, bool) {
		v, ok := form[argPrefix+name]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], v[0] != "" && v[0] != "off"
	}, err)
}

func fieldsWith(tool *tools.Tool, value func(name string) (string, bool), err error) []views.Field {
	errs := map[string]string{}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		for _, f := range ae.Fields {
			name := strings.TrimPrefix(f.Field, "arguments.")
			if i := strings.IndexByte(name, '.'); i >= 0 {
				name = name[:i] // a nested field belongs to its top-level input
			}
			if errs[name] == "" {
				errs[name] = f.Message
			}
		}
	}
	params := tool.Params()
	out := make([]views.Field, len(params))
	for i, p := range params {
		v, set := value(p.Name)
		out[i] = views.Field{Param: p, Value: v, Checked: p.Type == "boolean" && set, Error: errs[p.Name]}
	}
	return out
}

// fieldError is the message for one field, if the error names it.
func fieldError(err error, field string) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		for _, f := range ae.Fields {
			if f.Field == field {
				return f.Message
			}
		}
	}
	return ""
}

// fieldErrors is the message for each field the error names (the first
// when it names one twice).
func fieldErrors(err error) map[string]string {
	out := map[string]string{}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		for _, f := range ae.Fields {
			if out[f.Field] == "" {
				out[f.Field] = f.Message
			}
		}
	}
	return out
}
