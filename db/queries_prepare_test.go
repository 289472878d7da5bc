package db_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gatehouse/gatehouse/internal/dbtest"
)

// Every statement sqlc generated is prepared against the migrated schema:
// PostgreSQL then parses it, resolves every name and deduces every
// parameter's type. A query the schema no longer fits (a renamed column,
// a parameter used as a domain in one place and as text in another)
// fails here, not in the request that first runs it.
func TestQueries_AllPrepareAgainstTheSchema(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.sql.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated query files: %v", err)
	}
	queries := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					sql, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %v", name.Name, err)
					}
					queries[f+": "+name.Name] = sql
				}
			}
		}
	}
	if len(queries) < 100 {
		t.Fatalf("found %d queries; the generated files changed shape", len(queries))
	}
	conn, err := dbtest.MustPool(t).Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for name, sql := range queries {
		if _, err := conn.Conn().Prepare(t.Context(), "", sql); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
