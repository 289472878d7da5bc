package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// specExample is the Trust Graduation Protocol's own example body (v0.1,
// §3.1), verbatim.
const specExample = `{
  "status": "allowed_with_constraints",
  "action_class": "email.send.internal",
  "constraints": {
    "domain_allowlist": ["company.com"],
    "rate_limit": { "count": 5, "window": "PT1H" },
    "expires_at": "2026-06-13T18:00:00Z"
  }
}`

func TestParseTGPDecision_AcceptsTheSpecsExample(t *testing.T) {
	t.Parallel()
	d, cs, err := ParseTGPDecision(json.RawMessage(specExample))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 6, 13, 18, 0, 0, 0, time.UTC)
	want := []Constraint{
		{Kind: ConstraintRateLimit, Limit: 5, Window: time.Hour},
		{Kind: ConstraintDomainAllowlist, Values: []string{"company.com"}},
		{Kind: ConstraintExpiresAt, At: at},
	}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("constraints %+v, want %+v", cs, want)
	}
	if d.Status != StateAllowedWithConstraints || d.ActionClass != "email.send.internal" {
		t.Errorf("decision %+v", d)
	}
	// Written back, it is the example itself (keys sorted, spacing aside).
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal(got, &a)
	json.Unmarshal([]byte(specExample), &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip:\n got %s\nwant %s", got, specExample)
	}
}

func TestTGPOf_WritesEachKindOnceWithItsBound(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 6, 13, 18, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	early := at.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		d    Decision
		want string
	}{
		{name: "none", d: Decision{State: StateAllowed, ActionClass: "read.context"}, want: `{}`},
		{name: "flags", d: Decision{State: StateDeferred, Constraints: []string{"requires_witness", "dry_run_only", "internal_only", "staging_only"}},
			want: `{"dry_run_only":true,"internal_only":true,"requires_witness":true,"staging_only":true}`},
		{name: "bounds from the decision",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"rate_limit", "domain_allowlist", "expires_at", "max_amount", "redaction_rules"},
				Bounds: []Constraint{{Kind: "rate_limit", Limit: 5, Window: time.Hour}, {Kind: "domain_allowlist", Values: []string{"@Company.com."}},
					{Kind: "expires_at", At: at}, {Kind: "max_amount", Amount: 250.5}, {Kind: "redaction_rules", Values: []string{"b.c", "a"}}}},
			want: `{"domain_allowlist":["company.com"],"expires_at":"2026-06-13T16:00:00Z","max_amount":250.5,"rate_limit":{"count":5,"window":"PT1H"},"redaction_rules":["a","b.c"]}`},
		{name: "a bound of a kind the decision does not name is not written",
			d:    Decision{State: StateAllowed, Bounds: []Constraint{{Kind: "domain_allowlist", Values: []string{"a.com"}}}},
			want: `{}`},
		{name: "a kind with no bound applies",
			d:    Decision{State: StateAllowedWithConstraints, Constraints: []string{"domain_allowlist", "max_amount"}},
			want: `{"domain_allowlist":true,"max_amount":true}`},
		{name: "the strictest of several",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"max_amount", "max_amount", "expires_at", "expires_at"},
				Bounds: []Constraint{{Kind: "max_amount", Amount: 100}, {Kind: "max_amount", Amount: 50}, {Kind: "expires_at", At: at}, {Kind: "expires_at", At: early}}},
			want: `{"expires_at":"2026-06-13T15:00:00Z","max_amount":50}`},
		{name: "every rate_limit window, the smaller count per window, shortest first",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"rate_limit"},
				Bounds: []Constraint{{Kind: "rate_limit", Limit: 100, Window: 24 * time.Hour}, {Kind: "rate_limit", Limit: 5, Window: time.Minute},
					{Kind: "rate_limit", Limit: 3, Window: time.Minute}}},
			want: `{"rate_limit":[{"count":3,"window":"PT1M"},{"count":100,"window":"PT24H"}]}`},
		{name: "domain allowlists intersect exactly",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"domain_allowlist"},
				Bounds: []Constraint{{Kind: "domain_allowlist", Values: []string{"example.com", "other.org"}}, {Kind: "domain_allowlist", Values: []string{"api.example.com", "b.net"}}}},
			want: `{"domain_allowlist":["api.example.com"]}`},
		{name: "disjoint allowlists allow nothing",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"domain_allowlist"},
				Bounds: []Constraint{{Kind: "domain_allowlist", Values: []string{"a.com"}}, {Kind: "domain_allowlist", Values: []string{"b.com"}}}},
			want: `{"domain_allowlist":[]}`},
		{name: "recipient allowlists intersect exactly",
			d: Decision{State: StateAllowedWithConstraints, Constraints: []string{"recipient_allowlist"},
				Bounds: []Constraint{{Kind: "recipient_allowlist", Values: []string{"Ana@Example.com", "@shared.org", "bob@else.net"}},
					{Kind: "recipient_allowlist", Values: []string{"example.com", "shared.org", "cy@shared.org"}}}},
			want: `{"recipient_allowlist":["ana@example.com","cy@shared.org","shared.org"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := TGPOf(tc.d)
			if got.Status != tc.d.State || got.ActionClass != tc.d.ActionClass {
				t.Errorf("status %q class %q", got.Status, got.ActionClass)
			}
			b, err := json.Marshal(got.Constraints)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("constraints\n got %s\nwant %s", b, tc.want)
			}
		})
	}
}

// What the one written value allows is what all the bounds allow
// together: checked against Check itself, host by host.
func TestTGPOf_IntersectionAllowsWhatEveryListAllows(t *testing.T) {
	t.Parallel()
	lists := [][]string{{"example.com", "x.org"}, {"api.example.com", "x.org", "y.net"}, {"deep.api.example.com", "example.com"}}
	hosts := []string{"example.com", "api.example.com", "deep.api.example.com", "other.example.com", "x.org", "a.x.org", "y.net", "z.io"}
	var bounds []Constraint
	var names []string
	for _, l := range lists {
		bounds = append(bounds, Constraint{Kind: ConstraintDomainAllowlist, Values: l})
		names = append(names, ConstraintDomainAllowlist)
	}
	one := TGPOf(Decision{Constraints: names, Bounds: bounds}).Constraints.DomainAllowlist
	for _, h := range hosts {
		facts := Facts{URLs: []string{"https://" + h + "/hook"}}
		all := Check(bounds, facts) == nil
		merged := Check([]Constraint{{Kind: ConstraintDomainAllowlist, Values: one}}, facts) == nil
		if len(one) == 0 {
			merged = false
		}
		if all != merged {
			t.Errorf("%s: every list allows it %v, the merged list %v (%v)", h, all, merged, one)
		}
	}
}

func TestParseTGPConstraints_NamesTheFieldAtFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, field string
	}{
		{`[]`, "constraints"},
		{`null`, "constraints"},
		{`{"speed_limit": 1}`, "constraints.speed_limit"},
		{`{"internal_only": "yes"}`, "constraints.internal_only"},
		{`{"max_amount": 0}`, "constraints.max_amount"},
		{`{"max_amount": "10"}`, "constraints.max_amount"},
		{`{"domain_allowlist": "company.com"}`, "constraints.domain_allowlist"},
		{`{"domain_allowlist": []}`, "constraints.domain_allowlist"},
		{`{"domain_allowlist": [""]}`, "constraints.domain_allowlist"},
		{`{"redaction_rules": ["a b"]}`, "constraints.redaction_rules"},
		{`{"expires_at": "tomorrow"}`, "constraints.expires_at"},
		{`{"expires_at": "2026-06-13 18:00"}`, "constraints.expires_at"},
		{`{"rate_limit": 5}`, "constraints.rate_limit"},
		{`{"rate_limit": []}`, "constraints.rate_limit"},
		{`{"rate_limit": {"count": 5}}`, "constraints.rate_limit.window"},
		{`{"rate_limit": {"window": "PT1H"}}`, "constraints.rate_limit.count"},
		{`{"rate_limit": {"count": 0, "window": "PT1H"}}`, "constraints.rate_limit.count"},
		{`{"rate_limit": {"count": 1.5, "window": "PT1H"}}`, "constraints.rate_limit.count"},
		{`{"rate_limit": {"count": 5, "window": "P1M"}}`, "constraints.rate_limit.window"},
		{`{"rate_limit": {"count": 5, "window": "PT0S"}}`, "constraints.rate_limit.window"},
		{`{"rate_limit": {"count": 5, "window": 3600}}`, "constraints.rate_limit.window"},
		{`{"rate_limit": {"count": 5, "window": "PT1H", "burst": 2}}`, "constraints.rate_limit.burst"},
		{`{"rate_limit": [{"count": 5, "window": "PT1H"}, {"count": 5, "window": "1h"}]}`, "constraints.rate_limit.1.window"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			_, err := ParseTGPConstraints("constraints", json.RawMessage(tc.body))
			var fe *TGPFieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}

func TestParseTGPConstraints_ReadsEveryKind(t *testing.T) {
	t.Parallel()
	body := `{"internal_only": true, "staging_only": false, "dry_run_only": true, "max_amount": 99.5,
		"rate_limit": [{"count": 5, "window": "PT1H"}, {"count": 1, "window": "pt1m"}],
		"recipient_allowlist": ["ana@example.com"], "domain_allowlist": ["example.com"],
		"expires_at": "2026-06-13T20:00:00+02:00", "requires_witness": true, "redaction_rules": ["body"]}`
	cs, err := ParseTGPConstraints("constraints", json.RawMessage(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []Constraint{
		{Kind: ConstraintInternalOnly}, {Kind: ConstraintDryRunOnly}, {Kind: ConstraintMaxAmount, Amount: 99.5},
		{Kind: ConstraintRateLimit, Limit: 5, Window: time.Hour}, {Kind: ConstraintRateLimit, Limit: 1, Window: time.Minute},
		{Kind: ConstraintRecipientAllowlist, Values: []string{"ana@example.com"}}, {Kind: ConstraintDomainAllowlist, Values: []string{"example.com"}},
		{Kind: ConstraintExpiresAt, At: time.Date(2026, 6, 13, 18, 0, 0, 0, time.UTC)}, {Kind: ConstraintRequiresWitness},
		{Kind: ConstraintRedactionRules, Values: []string{"body"}},
	}
	if len(cs) != len(want) {
		t.Fatalf("got %+v", cs)
	}
	for i := range want {
		if cs[i].Kind != want[i].Kind || cs[i].Amount != want[i].Amount || cs[i].Limit != want[i].Limit || cs[i].Window != want[i].Window ||
			!reflect.DeepEqual(cs[i].Values, want[i].Values) || !cs[i].At.Equal(want[i].At) {
			t.Errorf("constraint %d: %+v, want %+v", i, cs[i], want[i])
		}
	}
}

func TestParseTGPDecision_RefusesAnUnknownStatusOrClass(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, field string }{
		{`{"action_class": "draft.compose"}`, "status"},
		{`{"status": "approved"}`, "status"},
		{`{"status": "allowed", "action_class": "Send Email!"}`, "action_class"},
		{`{"status": "allowed", "constraints": {"x": 1}}`, "constraints.x"},
		{`[1]`, "body"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			_, _, err := ParseTGPDecision(json.RawMessage(tc.body))
			var fe *TGPFieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Errorf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
	// A legacy alias canonicalises.
	d, _, err := ParseTGPDecision(json.RawMessage(`{"status": "human_only", "action_class": "payment.spend"}`))
	if err != nil || d.ActionClass != "payment.initiate" {
		t.Errorf("legacy alias: %+v %v", d, err)
	}
}

// Every decision state is a protocol status, one for one.
func TestTGPOf_StatusIsTheState(t *testing.T) {
	t.Parallel()
	for _, s := range States {
		if got := TGPOf(Decision{State: s}).Status; got != s {
			t.Errorf("%s → %s", s, got)
		}
	}
}
