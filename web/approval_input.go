package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// What an approver sends is never silently dropped: approve and reject
// take JSON or a form, and nothing else (415); every field is known, and
// every constraint well formed, or the request is 422 naming the field.

// approverBody is the kind of body an approve or reject request carries.
type approverBody int

const (
	bodyEmpty approverBody = iota
	bodyJSON
	bodyForm
)

// approverBodyKind reads the Content-Type: JSON, a form, or no body at all.
func approverBodyKind(c echo.Context) (approverBody, error) {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct == "" {
		if c.Request().ContentLength > 0 {
			return 0, unsupportedMediaType()
		}
		return bodyEmpty, nil
	}
	media, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, unsupportedMediaType()
	}
	switch media {
	case echo.MIMEApplicationJSON:
		return bodyJSON, nil
	case echo.MIMEApplicationForm, echo.MIMEMultipartForm:
		return bodyForm, nil
	}
	return 0, unsupportedMediaType()
}

func unsupportedMediaType() error {
	return apperr.Errorf(apperr.EUNSUPPORTED, "Send the decision as JSON (application/json) or as a form (application/x-www-form-urlencoded); nothing was done.")
}

// constraintsFromJSON reads {"constraints": [...]} strictly: each
// constraint's kind must be known and its fields those of a constraint.
func constraintsFromJSON(body []byte) ([]policy.Constraint, error) {
	var in struct {
		Constraints []json.RawMessage `json:"constraints"`
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	out := make([]policy.Constraint, 0, len(in.Constraints))
	for i, raw := range in.Constraints {
		field := fmt.Sprintf("constraints.%d", i)
		var c policy.Constraint
		if err := decodeJSON(raw, &c); err != nil {
			var ae *apperr.Error
			if errors.As(err, &ae) && len(ae.Fields) > 0 {
				f := ae.Fields[0]
				return nil, apperr.Invalid(fmt.Sprintf("Constraint %d: the field %s %s.", i, f.Field, f.Message),
					apperr.FieldError{Field: field + "." + f.Field, Message: f.Message})
			}
			return nil, apperr.Invalid(fmt.Sprintf("Constraint %d must be a JSON object.", i), apperr.FieldError{Field: field, Message: "must be a JSON object"})
		}
		if !slices.Contains(policy.ConstraintKinds, c.Kind) {
			return nil, apperr.Invalid(fmt.Sprintf("Constraint %d: %q is not a constraint kind.", i, c.Kind),
				apperr.FieldError{Field: field + ".kind", Message: "must be one of " + strings.Join(policy.ConstraintKinds, ", ")})
		}
		if err := c.Validate(); err != nil {
			return nil, apperr.Invalid(fmt.Sprintf("Constraint %d (%s) is malformed: %s.", i, c.Kind, strings.TrimPrefix(err.Error(), "policy: ")),
				apperr.FieldError{Field: field, Message: strings.TrimPrefix(err.Error(), "policy: ")})
		}
		out = append(out, c)
	}
	return out, nil
}

// approveFormFields are the fields the approve form may carry;
// irreversible_ack is the page's second confirmation (see approveApproval),
// the grant_ fields its "allow similar" choice (grants.go).
var approveFormFields = append([]string{"_csrf", "irreversible_ack", "dry_run_only", "internal_only", "staging_only", "requires_witness",
	"recipient_allowlist", "domain_allowlist", "max_amount", "expires_at", "redaction_rules"}, grantFormFields...)

// constraintsFromForm reads the approve form's optional constraints; a field
// the form does not have is refused, naming it.
func constraintsFromForm(form url.Values) ([]policy.Constraint, error) {
	for name := range form {
		if !slices.Contains(approveFormFields, name) {
			return nil, apperr.Invalid(fmt.Sprintf("The field %q is not part of the approve form; nothing was done.", name),
				apperr.FieldError{Field: name, Message: "is not a known field"})
		}
	}
	var out []policy.Constraint
	list := func(s string) []string {
		return slices.DeleteFunc(strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' }), func(v string) bool { return v == "" })
	}
	for _, kind := range []string{policy.ConstraintDryRunOnly, policy.ConstraintInternalOnly, policy.ConstraintStagingOnly, policy.ConstraintRequiresWitness} {
		if form.Get(kind) != "" {
			out = append(out, policy.Constraint{Kind: kind})
		}
	}
	for _, kind := range []string{policy.ConstraintRecipientAllowlist, policy.ConstraintDomainAllowlist, policy.ConstraintRedactionRules} {
		if v := list(form.Get(kind)); len(v) > 0 {
			out = append(out, policy.Constraint{Kind: kind, Values: v})
		}
	}
	if v := strings.TrimSpace(form.Get("max_amount")); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n > 0) || n > 1e15 {
			return nil, apperr.Invalid("The max amount must be a positive number.", apperr.FieldError{Field: "max_amount", Message: "must be a positive number"})
		}
		out = append(out, policy.Constraint{Kind: policy.ConstraintMaxAmount, Amount: n})
	}
	if v := strings.TrimSpace(form.Get("expires_at")); v != "" {
		at, err := time.ParseInLocation("2006-01-02T15:04", v, time.UTC)
		if err != nil {
			return nil, apperr.Invalid("Valid until must be a date and time.", apperr.FieldError{Field: "expires_at", Message: "must be a date and time"})
		}
		out = append(out, policy.Constraint{Kind: policy.ConstraintExpiresAt, At: at})
	}
	for i, c := range out {
		if err := c.Validate(); err != nil {
			return nil, apperr.Invalid(fmt.Sprintf("The %s constraint is malformed: %s.", c.Kind, strings.TrimPrefix(err.Error(), "policy: ")),
				apperr.FieldError{Field: out[i].Kind, Message: strings.TrimPrefix(err.Error(), "policy: ")})
		}
	}
	return out, nil
}

// approvalConstraints reads an approve request's constraints, from JSON or
// a form.
func approvalConstraints(c echo.Context) ([]policy.Constraint, error) {
	kind, err := approverBodyKind(c)
	if err != nil {
		return nil, err
	}
	switch kind {
	case bodyJSON:
		body, err := readBody(c)
		if err != nil {
			return nil, err
		}
		return constraintsFromJSON(body)
	case bodyForm:
		form, err := c.FormParams()
		if err != nil {
			return nil, apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
		}
		return constraintsFromForm(form)
	}
	return nil, nil
}

// rejectionReason reads a reject request's reason, from JSON or a form.
func rejectionReason(c echo.Context) (string, error) {
	kind, err := approverBodyKind(c)
	if err != nil {
		return "", err
	}
	switch kind {
	case bodyJSON:
		var in struct {
			Reason string `json:"reason"`
		}
		body, err := readBody(c)
		if err != nil {
			return "", err
		}
		if err := decodeJSON(body, &in); err != nil {
			return "", err
		}
		return in.Reason, nil
	case bodyForm:
		form, err := c.FormParams()
		if err != nil {
			return "", apperr.Errorf(apperr.EBADREQ, "The form could not be read.")
		}
		for name := range form {
			if name != "_csrf" && name != "reason" {
				return "", apperr.Invalid(fmt.Sprintf("The field %q is not part of the reject form; nothing was done.", name),
					apperr.FieldError{Field: name, Message: "is not a known field"})
			}
		}
		return form.Get("reason"), nil
	}
	return "", nil
}
