package web

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"

	"github.com/gatehouse/gatehouse/internal/apperr"
)

// OpenAPIDocument is the REST contract: the source of truth for /api/v1.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

type apiSpec struct {
	doc *openapi3.T
	// routes are the document's operations by echo's route ("POST
	// /api/v1/conversations/:id/tool-calls"): echo has already matched
	// the request, so finding its operation is a map lookup, not a second
	// router's regular expressions on every call.
	routes map[string]apiRoute
	// byEcho caches the lookup by echo's own route string (a fixed set).
	byEcho sync.Map
}

type apiRoute struct {
	route *routers.Route
	// params are the path parameters' names in the document, in order.
	params []string
}

func loadAPISpec() (*apiSpec, error) {
	doc, err := LoadOpenAPI()
	if err != nil {
		return nil, err
	}
	spec := &apiSpec{doc: doc, routes: map[string]apiRoute{}}
	for path, item := range doc.Paths.Map() {
		echoPath, params := echoRoute(path)
		for method, op := range item.Operations() {
			spec.routes[method+" "+echoPath] = apiRoute{
				route:  &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op},
				params: params,
			}
		}
	}
	return spec, nil
}

// echoRoute turns an OpenAPI path template into echo's form, with every
// parameter named ":" (echo's own names may differ; the document's names
// are kept in order).
func echoRoute(path string) (string, []string) {
	segs := strings.Split(path, "/")
	var params []string
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			params = append(params, seg[1:len(seg)-1])
			segs[i] = ":"
		}
	}
	return strings.Join(segs, "/"), params
}

// find returns the operation echo matched, with its path parameters under
// the document's names.
func (a *apiSpec) find(c echo.Context) (*routers.Route, map[string]string, bool) {
	key := c.Request().Method + " " + c.Path()
	r, ok := a.byEcho.Load(key)
	if !ok {
		echoPath, _ := echoRoute(colonParams(c.Path()))
		r, _ = a.byEcho.LoadOrStore(key, a.routes[c.Request().Method+" "+echoPath])
	}
	route := r.(apiRoute)
	if route.route == nil || len(route.params) != len(c.ParamValues()) {
		return nil, nil, false
	}
	params := make(map[string]string, len(route.params))
	for i, name := range route.params {
		params[name] = c.ParamValues()[i]
	}
	return route.route, params, true
}

// colonParams rewrites echo's ":name" segments as "{name}".
func colonParams(path string) string {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, ":") {
			segs[i] = "{" + seg[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// LoadOpenAPI parses and validates the embedded OpenAPI document.
func LoadOpenAPI() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument)
	if err != nil {
		return nil, fmt.Errorf("web: load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("web: openapi.yaml is invalid: %w", err)
	}
	return doc, nil
}

// openAPIDocument handles "GET /api/v1/openapi.yaml".
func (s *Server) openAPIDocument(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", OpenAPIDocument)
}

// validateAPIRequest checks every API request against openapi.yaml: a
// malformed body is 400, a body or parameter that breaks the schema is 422
// naming each field. Routes the document does not describe fall through to
// echo (404 or 405).
func (s *Server) validateAPIRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		route, params, ok := s.api.find(c)
		if !ok {
			return next(c)
		}
		err := openapi3filter.ValidateRequest(req.Context(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{
				AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, // requireToken did it
				MultiError:         true,
			},
		})
		if err != nil {
			return requestProblem(err)
		}
		return next(c)
	}
}

// requestProblem turns kin-openapi's validation errors into one EINVALID
// (or EBADREQ for a body that is not JSON) naming each field at fault.
func requestProblem(err error) error {
	var fields []apperr.FieldError
	malformed := false
	var walk func(error)
	walk = func(err error) {
		if re, ok := err.(*openapi3filter.RequestError); ok && re.Parameter != nil {
			// A parameter that breaks its schema, or is not of its type,
			// is a field of the caller's (422), not a malformed body.
			fields = append(fields, parameterFields(re)...)
			return
		}
		var multi openapi3.MultiError
		if errors.As(err, &multi) {
			for _, e := range multi {
				walk(e)
			}
			return
		}
		var se *openapi3.SchemaError
		var re *openapi3filter.RequestError
		switch {
		case errors.As(err, &se):
			field := strings.Join(se.JSONPointer(), ".")
			if errors.As(err, &re) && re.Parameter != nil {
				field = joinField(re.Parameter.Name, field)
			}
			fields = append(fields, apperr.FieldError{Field: field, Message: se.Reason})
		case errors.As(err, &re):
			var pe *openapi3filter.ParseError
			if errors.As(re.Err, &pe) || re.Reason == "header Content-Type has unexpected value" {
				malformed = true
			}
			switch {
			case re.Parameter != nil:
				fields = append(fields, apperr.FieldError{Field: re.Parameter.Name, Message: re.Error()})
			case re.RequestBody != nil && re.Err == nil:
				fields = append(fields, apperr.FieldError{Field: "body", Message: re.Reason})
			default:
				fields = append(fields, apperr.FieldError{Field: "body", Message: re.Error()})
			}
		default:
			fields = append(fields, apperr.FieldError{Field: "", Message: err.Error()})
		}
	}
	walk(err)
	if malformed {
		return &apperr.Error{Code: apperr.EBADREQ, Message: "The request body must be a JSON object sent as application/json.", Fields: fields}
	}
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		if f.Field != "" {
			names = append(names, f.Field)
		}
	}
	msg := "The request is invalid."
	if len(names) > 0 {
		msg = "Invalid fields: " + strings.Join(names, ", ") + "."
	}
	return apperr.Invalid(msg, fields...)
}

// parameterFields names a parameter in each of its errors (its schema's
// errors come wrapped in a MultiError, which would hide the name).
func parameterFields(re *openapi3filter.RequestError) []apperr.FieldError {
	name := re.Parameter.Name
	var out []apperr.FieldError
	var collect func(error)
	collect = func(err error) {
		var multi openapi3.MultiError
		var se *openapi3.SchemaError
		switch {
		case errors.As(err, &multi):
			for _, e := range multi {
				collect(e)
			}
		case errors.As(err, &se):
			out = append(out, apperr.FieldError{Field: joinField(name, strings.Join(se.JSONPointer(), ".")), Message: se.Reason})
		default:
			out = append(out, apperr.FieldError{Field: name, Message: re.Error()})
		}
	}
	collect(re.Err)
	if len(out) == 0 {
		out = append(out, apperr.FieldError{Field: name, Message: re.Error()})
	}
	return out
}

func joinField(a, b string) string {
	if b == "" {
		return a
	}
	return a + "." + b
}
