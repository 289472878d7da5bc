package proposals_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/proposals"
)

// TestPropose_ArgumentsAreCheckedAsStrictlyAsABody: whatever path calls
// the service (chat's model turns, MCP, the pages' forms), arguments that
// a JSON body could not carry are a field error naming the argument, and
// nothing is stored; auto-applied or not.
func TestPropose_ArgumentsAreCheckedAsStrictlyAsABody(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	conv := f.conversation(t, "auto")
	const stored = `SELECT (SELECT count(*) FROM proposals) + (SELECT count(*) FROM receipts) + (SELECT count(*) FROM records)`
	var before int
	f.pool.QueryRow(t.Context(), stored).Scan(&before)
	for name, c := range map[string]struct{ value, field string }{
		"nested 33 deep":           {strings.Repeat(`{"a":`, 32) + "1" + strings.Repeat("}", 32), ""},
		"nested 1,200 deep":        {strings.Repeat(`{"a":`, 1199) + "1" + strings.Repeat("}", 1199), ""},
		"a NUL":                    {`{"a":"x\u0000"}`, "arguments.value.a"},
		"a lone surrogate":         {`{"a":"\udc00"}`, "arguments.value.a"},
		"a duplicate key":          {`{"a":1,"a":2}`, "arguments.value.a"},
		"a number no double holds": {`{"a":-1e400}`, "arguments.value.a"},
	} {
		args := json.RawMessage(`{"collection":"c","key":"k","value":` + c.value + `}`)
		_, err := f.props.Propose(t.Context(), f.agent, proposals.InConversation(conv),
			proposals.Input{Tool: "records.put", Arguments: args, Rationale: "keep the record current"})
		var ae *apperr.Error
		if apperr.Code(err) != apperr.EINVALID || !errors.As(err, &ae) || len(ae.Fields) == 0 || !strings.HasPrefix(ae.Fields[0].Field, "arguments.value") {
			t.Errorf("%s: Propose = %v, want a field error on arguments.value", name, err)
			continue
		}
		if c.field != "" && ae.Fields[0].Field != c.field {
			t.Errorf("%s: the error names %q, want %q", name, ae.Fields[0].Field, c.field)
		}
	}
	var after int
	f.pool.QueryRow(t.Context(), stored).Scan(&after)
	if after != before {
		t.Fatalf("%d rows stored by refused calls", after-before)
	}
}
