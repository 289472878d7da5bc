package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// The Trust Graduation Protocol's wire format (docs/tgp.md): the protocol's
// shape of a decision beside Gatehouse's own, the JSON Schemas of its
// five documents served at their $id, and approvals in its shape.

//go:embed schemas/*.schema.json
var schemaFiles embed.FS

// SchemaNames are the JSON Schemas the server publishes, each at
// /schemas/<name>.
var SchemaNames = []string{
	"decision.schema.json", "approval-packet.schema.json", "receipt.schema.json",
	"evidence.schema.json", "posterior.schema.json",
}

// jsonSchema handles "GET /schemas/:name": one of the protocol's JSON
// Schemas (draft 2020-12), public and cacheable. The files say a relative
// $id ("/schemas/decision.schema.json"); it is served absolute, under the
// server's public URL (GATEHOUSE_PUBLIC_URL) or else the origin the
// request reached, so the schema resolves at its $id, and the relative
// $refs between the schemas resolve against it.
func (s *Server) jsonSchema(c echo.Context) error {
	name := c.Param("name")
	if !slices.Contains(SchemaNames, name) {
		return echo.ErrNotFound
	}
	raw, err := schemaFiles.ReadFile("schemas/" + name)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	origin := strings.TrimRight(s.cfg.IssuerURL, "/")
	if origin == "" {
		// The $id follows the request: a cache must not answer one
		// scheme's copy for another (the host is in the cache's key).
		origin = c.Scheme() + "://" + c.Request().Host
		h.Set("Vary", "X-Forwarded-Proto")
	}
	id, err := json.Marshal(origin + "/schemas/" + name)
	if err != nil {
		return err
	}
	relative := []byte(`"$id": "/schemas/` + name + `"`)
	if !bytes.Contains(raw, relative) {
		return errors.New("web: schema " + name + " does not say its relative $id")
	}
	body := bytes.Replace(raw, relative, append([]byte(`"$id": `), id...), 1)
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set(echo.HeaderAccessControlAllowOrigin, "*") // public documents, no credentials
	h.Set("ETag", etag)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && slices.ContainsFunc(strings.Split(inm, ","), func(t string) bool {
		t = strings.TrimSpace(t)
		return t == etag || t == "W/"+etag || t == "*"
	}) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, "application/schema+json", body)
}

// decisionJSON is a decision as the API answers it: Gatehouse's own
// fields, unchanged, and the protocol's shape beside them under tgp (its
// status and constraints would clash with a proposal's status and the
// decision's list of constraint names).
type decisionJSON struct {
	policy.Decision
	TGP policy.TGPDecision `json:"tgp"`
}

// toDecisionJSON is d with its protocol shape; nil stays nil.
func toDecisionJSON(d *policy.Decision) *decisionJSON {
	if d == nil {
		return nil
	}
	return &decisionJSON{Decision: *d, TGP: policy.TGPOf(*d)}
}

// approvalConstraintsOrTGP reads an approve request's constraints: in the
// protocol's shape when its JSON body is one (the protocol's decision
// body, constraints keyed by kind: the approver's decision that the call
// may run inside them), else as approvalConstraints reads them.
func (s *Server) approvalConstraintsOrTGP(c echo.Context, id uuid.UUID) ([]policy.Constraint, error) {
	if kind, err := approverBodyKind(c); err != nil || kind != bodyJSON {
		return approvalConstraints(c)
	}
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	cs, class, ok, err := tgpApproval(body)
	if !ok {
		return approvalConstraints(c)
	}
	if err != nil {
		return nil, err
	}
	if class != "" {
		a, err := s.props.Approval(c.Request().Context(), principal(c), id)
		if err != nil {
			return nil, err
		}
		if a.ActionClass != class {
			return nil, apperr.Invalid("This packet's call is of action class "+a.ActionClass+", not "+class+"; nothing was done.",
				apperr.FieldError{Field: "action_class", Message: "must be the packet's action class, " + a.ActionClass})
		}
	}
	return cs, nil
}

// tgpApproval reads an approve body in the protocol's shape: {"status":
// "allowed_with_constraints", "action_class": "…", "constraints": {kind:
// bound}}, every member optional but at least one of them there, and
// constraints an object. ok is false for a body of another shape
// (constraints as an array: Gatehouse's own). The status, when given, must
// be allowed or allowed_with_constraints: an approval lets the call run,
// and a refusal is the packet's reject. The class is canonicalised for
// the caller to compare with the packet's.
func tgpApproval(body []byte) (cs []policy.Constraint, class string, ok bool, err error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return nil, "", false, nil
	}
	_, status := probe["status"]
	_, hasClass := probe["action_class"]
	keyed := bytes.HasPrefix(bytes.TrimSpace(probe["constraints"]), []byte("{"))
	if !status && !hasClass && !keyed {
		return nil, "", false, nil
	}
	var in struct {
		Status      *string         `json:"status"`
		ActionClass *string         `json:"action_class"`
		Constraints json.RawMessage `json:"constraints"`
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, "", true, err
	}
	if in.Status != nil && *in.Status != string(policy.StateAllowed) && *in.Status != string(policy.StateAllowedWithConstraints) {
		return nil, "", true, apperr.Invalid("An approval says allowed or allowed_with_constraints; to refuse the call, reject the packet. Nothing was done.",
			apperr.FieldError{Field: "status", Message: "must be allowed or allowed_with_constraints"})
	}
	if in.ActionClass != nil {
		if class, err = policy.CanonicalClass(*in.ActionClass); err != nil {
			return nil, "", true, apperr.Invalid("The action class must be in dot notation, such as email.send.internal; nothing was done.",
				apperr.FieldError{Field: "action_class", Message: "must be an action class in dot notation"})
		}
	}
	if len(in.Constraints) > 0 {
		if cs, err = policy.ParseTGPConstraints("constraints", in.Constraints); err != nil {
			var fe *policy.TGPFieldError
			if errors.As(err, &fe) {
				return nil, "", true, apperr.Invalid("The constraint "+fe.Field+" "+fe.Message+"; nothing was done.",
					apperr.FieldError{Field: fe.Field, Message: fe.Message})
			}
			return nil, "", true, err
		}
	}
	if in.Status != nil && *in.Status == string(policy.StateAllowed) && len(cs) > 0 {
		return nil, "", true, apperr.Invalid("A decision with constraints is allowed_with_constraints; nothing was done.",
			apperr.FieldError{Field: "status", Message: "must be allowed_with_constraints when constraints are given"})
	}
	return cs, class, true, nil
}
