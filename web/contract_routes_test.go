package web_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/web"
)

// echoParam is one of echo's path parameters (":id").
var echoParam = regexp.MustCompile(`:([A-Za-z_][A-Za-z0-9_]*)`)

func TestOpenAPI_DocumentsEveryAPIRouteAndNoOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doc, err := web.LoadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, r := range e.srv.Routes() {
		// echo's group middleware adds catch-all "route not found" routes.
		if !strings.HasPrefix(r.Path, "/api/v1/") || strings.Contains(r.Path, "*") || !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, r.Method) {
			continue
		}
		served[r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for op := range served {
		if !documented[op] {
			t.Errorf("the server has %s but openapi.yaml does not describe it", op)
		}
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("openapi.yaml describes %s but the server has no such route", op)
		}
	}
}
