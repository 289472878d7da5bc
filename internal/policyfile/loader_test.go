package policyfile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/tools"
)

// A reload puts a good file in force and keeps it when the next is bad,
// saying why with the line; a good file clears the error. No database:
// the instance's row is not written.
func TestLoader_ABadFileKeepsTheLastGoodOne(t *testing.T) {
	t.Parallel()
	registry, err := tools.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tools:\n  records.put:\n    risk: high\n    class_rationale: Records are shown to customers.\n")
	getenv := func(string) string { return "" }
	f, data, err := Read(path, registry, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.ReplacePolicy(f, nil); err != nil {
		t.Fatal(err)
	}
	l := New(Config{Path: path, Getenv: getenv, Registry: registry}, f, data)
	first := l.Status()
	if first.FileHash != Hash(data) || first.PolicyHash != registry.Hash() || first.Error != nil {
		t.Fatalf("at start: %+v", first)
	}

	write("tools:\n  records.put:\n    risk: extreme\n")
	err = l.Reload(context.Background(), "test")
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("a bad file: %v", err)
	}
	st := l.Status()
	if st.Error == nil || st.Error.Line != 3 || st.FileHash != first.FileHash || st.PolicyHash != first.PolicyHash {
		t.Fatalf("after a bad file: %+v %+v", st, st.Error)
	}
	if put, _ := registry.Get("records.put"); put.Contract.Risk != "high" {
		t.Fatal("a bad file changed the registry")
	}

	// An empty file is what an editor leaves for a moment: not loaded.
	write("")
	if err := l.Reload(context.Background(), "test"); err == nil || l.Status().PolicyHash != first.PolicyHash {
		t.Fatalf("an empty file: %v", err)
	}
	write("# nothing\n{}\n")
	if err := l.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if st := l.Status(); st.Error != nil || st.PolicyHash == first.PolicyHash {
		t.Fatalf("an empty file: %+v", st)
	}
	if put, _ := registry.Get("records.put"); put.Contract.Risk != "medium" {
		t.Fatalf("an override the file dropped still holds: %s", put.Contract.Risk)
	}
}
