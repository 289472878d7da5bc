package web

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gatehouse/gatehouse/internal/apperr"
	"github.com/gatehouse/gatehouse/internal/policy"
)

// The protocol's own example body, verbatim, reads as an approval with its
// three constraints.
func TestTGPApproval_ReadsTheSpecsExample(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile("testdata/tgp_spec_decision.json")
	if err != nil {
		t.Fatal(err)
	}
	cs, class, ok, err := tgpApproval(body)
	if err != nil || !ok || class != "email.send.internal" || len(cs) != 3 {
		t.Fatalf("tgpApproval: %v %q %v %v", cs, class, ok, err)
	}
	at := time.Date(2026, 6, 13, 18, 0, 0, 0, time.UTC)
	if cs[0].Kind != policy.ConstraintRateLimit || cs[0].Limit != 5 || cs[0].Window != time.Hour ||
		cs[1].Kind != policy.ConstraintDomainAllowlist || len(cs[1].Values) != 1 || cs[1].Values[0] != "company.com" ||
		cs[2].Kind != policy.ConstraintExpiresAt || !cs[2].At.Equal(at) {
		t.Errorf("constraints %+v", cs)
	}
}

func TestTGPApproval_LeavesGatehousesShapeAlone(t *testing.T) {
	t.Parallel()
	for _, body := range []string{``, `{}`, `{"constraints": []}`, `{"constraints": [{"kind": "internal_only"}]}`, `not json`} {
		if _, _, ok, err := tgpApproval([]byte(body)); ok || err != nil {
			t.Errorf("%s: ok %v, err %v", body, ok, err)
		}
	}
}

func TestTGPApproval_BadInputNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, field string }{
		{`{"status": "review_required"}`, "status"},
		{`{"status": "allowed", "constraints": {"dry_run_only": true}}`, "status"},
		{`{"action_class": "Email Send"}`, "action_class"},
		{`{"constraints": {"max_amount": -1}}`, "constraints.max_amount"},
		{`{"constraints": {"rate_limit": {"count": 5, "window": "P1Y"}}}`, "constraints.rate_limit.window"},
		{`{"status": "allowed_with_constraints", "why": "x"}`, "why"},
		{`{"status": "allowed", "status": "blocked"}`, ""},
	} {
		_, _, ok, err := tgpApproval([]byte(tc.body))
		var ae *apperr.Error
		if !ok || !errors.As(err, &ae) || ae.Code != apperr.EINVALID && ae.Code != apperr.EBADREQ {
			t.Errorf("%s: ok %v, err %v", tc.body, ok, err)
			continue
		}
		if tc.field != "" && (len(ae.Fields) == 0 || ae.Fields[0].Field != tc.field) {
			t.Errorf("%s: %v, want the field %s", tc.body, ae.Fields, tc.field)
		}
	}
}
