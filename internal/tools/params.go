package tools

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// Param is one top-level argument of a tool, as a person reads it (the
// /tools page) or fills it in (the notebook's cell form).
type Param struct {
	Name        string
	Type        string // "string", "object", "array", "integer", "number", "boolean"
	Required    bool
	Description string
	// Hint sums up the constraints: "1–200 characters", "letters, digits, _ . -".
	Hint string
	// Enum lists the allowed values, when the schema fixes them.
	Enum []string
	// ItemType is the type of an array's items.
	ItemType string
}

// Params lists the top-level properties of the tool's schema, required
// ones first, each group in the order of their names.
func (t *Tool) Params() []Param {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type        string   `json:"type"`
			Description string   `json:"description"`
			MinLength   *int     `json:"minLength"`
			MaxLength   *int     `json:"maxLength"`
			Minimum     *float64 `json:"minimum"`
			Maximum     *float64 `json:"maximum"`
			Enum        []string `json:"enum"`
			Items       *struct {
				Type string `json:"type"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(t.Schema, &s); err != nil {
		return nil // NewRegistry compiled this schema; it is JSON
	}
	required := map[string]bool{}
	for _, n := range s.Required {
		required[n] = true
	}
	out := make([]Param, 0, len(s.Properties))
	for name, p := range s.Properties {
		var hints []string
		switch {
		case p.MinLength != nil && p.MaxLength != nil:
			hints = append(hints, itoa(*p.MinLength)+"–"+itoa(*p.MaxLength)+" characters")
		case p.MaxLength != nil:
			hints = append(hints, "up to "+itoa(*p.MaxLength)+" characters")
		}
		if p.Minimum != nil {
			hints = append(hints, "at least "+ftoa(*p.Minimum))
		}
		if p.Maximum != nil {
			hints = append(hints, "at most "+ftoa(*p.Maximum))
		}
		param := Param{Name: name, Type: p.Type, Required: required[name], Description: p.Description, Hint: strings.Join(hints, ", "), Enum: p.Enum}
		if p.Items != nil {
			param.ItemType = p.Items.Type
		}
		out = append(out, param)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
