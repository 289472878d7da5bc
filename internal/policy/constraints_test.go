package policy

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	t0              = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	internalDomains = []string{"corp.com", "@Corp.Example"}
)

func amount(f float64) *float64 { return &f }

func TestConstraint_Validate(t *testing.T) {
	cases := []struct {
		name    string
		c       Constraint
		wantErr bool
	}{
		{"internal_only", Constraint{Kind: ConstraintInternalOnly}, false},
		{"staging_only", Constraint{Kind: ConstraintStagingOnly}, false},
		{"dry_run_only", Constraint{Kind: ConstraintDryRunOnly}, false},
		{"requires_witness", Constraint{Kind: ConstraintRequiresWitness}, false},
		{"max_amount", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, false},
		{"max_amount zero", Constraint{Kind: ConstraintMaxAmount}, true},
		{"max_amount negative", Constraint{Kind: ConstraintMaxAmount, Amount: -1}, true},
		{"max_amount NaN", Constraint{Kind: ConstraintMaxAmount, Amount: math.NaN()}, true},
		{"max_amount infinite", Constraint{Kind: ConstraintMaxAmount, Amount: math.Inf(1)}, true},
		{"rate_limit", Constraint{Kind: ConstraintRateLimit, Limit: 5, Window: time.Hour}, false},
		{"rate_limit no limit", Constraint{Kind: ConstraintRateLimit, Window: time.Hour}, true},
		{"rate_limit no window", Constraint{Kind: ConstraintRateLimit, Limit: 5}, true},
		{"recipient_allowlist", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"a@b.com", "@c.com"}}, false},
		{"recipient_allowlist empty", Constraint{Kind: ConstraintRecipientAllowlist}, true},
		{"recipient_allowlist blank value", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"a@b.com", " @ "}}, true},
		{"domain_allowlist", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"b.com"}}, false},
		{"domain_allowlist empty", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{}}, true},
		{"domain_allowlist blank value", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{""}}, true},
		{"expires_at", Constraint{Kind: ConstraintExpiresAt, At: t0}, false},
		{"expires_at no time", Constraint{Kind: ConstraintExpiresAt}, true},
		{"redaction_rules", Constraint{Kind: ConstraintRedactionRules, Values: []string{"body", "payee.account"}}, false},
		{"redaction_rules empty", Constraint{Kind: ConstraintRedactionRules}, true},
		{"redaction_rules bad path", Constraint{Kind: ConstraintRedactionRules, Values: []string{"payee..account"}}, true},
		{"redaction_rules empty path", Constraint{Kind: ConstraintRedactionRules, Values: []string{""}}, true},
		{"unknown kind", Constraint{Kind: "be_nice"}, true},
		{"empty kind", Constraint{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.c.Validate(); (err != nil) != c.wantErr {
				t.Errorf("Validate(%+v) = %v, want error %v", c.c, err, c.wantErr)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name       string
		c          Constraint
		f          Facts
		wantReason string // "" when the constraint holds
	}{
		{"internal_only holds", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			Recipients: []string{"ann@corp.com", "Bob <bob@ENG.corp.com>", "cy@corp.example"},
			URLs:       []string{"https://wiki.corp.com/x", "https://CORP.EXAMPLE./y"}}, ""},
		{"internal_only nothing sent", Constraint{Kind: ConstraintInternalOnly}, Facts{}, ""},
		{"internal_only external recipient", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			Recipients: []string{"ann@corp.com", "bob@evil.com"}}, "bob@evil.com (domain evil.com) is not internal"},
		{"internal_only look-alike domain", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			Recipients: []string{"bob@evilcorp.com"}}, "is not internal"},
		{"internal_only external URL", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			URLs: []string{"https://corp.com.evil.com/"}}, "host corp.com.evil.com"},
		{"internal_only userinfo trick", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			URLs: []string{"https://corp.com@evil.com/"}}, "host evil.com"},
		{"internal_only no internal domains", Constraint{Kind: ConstraintInternalOnly}, Facts{
			Recipients: []string{"ann@corp.com"}}, "is not internal"},
		{"internal_only bad address", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			Recipients: []string{"corp.com"}}, "not an email address"},
		{"internal_only URL without host", Constraint{Kind: ConstraintInternalOnly}, Facts{InternalDomains: internalDomains,
			URLs: []string{"corp.com/path"}}, "not a URL with a host"},

		{"staging_only holds", Constraint{Kind: ConstraintStagingOnly}, Facts{Environment: "staging"}, ""},
		{"staging_only production", Constraint{Kind: ConstraintStagingOnly}, Facts{Environment: "production"}, `environment "production" is not staging`},
		{"staging_only unknown", Constraint{Kind: ConstraintStagingOnly}, Facts{}, "is not staging"},

		{"dry_run_only never breaks", Constraint{Kind: ConstraintDryRunOnly}, Facts{Environment: "production"}, ""},

		{"max_amount under", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, Facts{Amount: amount(499.99)}, ""},
		{"max_amount equal", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, Facts{Amount: amount(500)}, ""},
		{"max_amount no amount", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, Facts{}, ""},
		{"max_amount over", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, Facts{Amount: amount(500.01)}, "amount 500.01 is over 500"},
		{"max_amount NaN", Constraint{Kind: ConstraintMaxAmount, Amount: 500}, Facts{Amount: amount(math.NaN())}, "is over"},

		{"rate_limit under", Constraint{Kind: ConstraintRateLimit, Limit: 3, Window: time.Hour}, Facts{RecentCalls: map[time.Duration]int{time.Hour: 2}}, ""},
		{"rate_limit reached", Constraint{Kind: ConstraintRateLimit, Limit: 3, Window: time.Hour}, Facts{RecentCalls: map[time.Duration]int{time.Hour: 3}}, "reach the limit of 3"},
		// Each limit is compared with its own window's count: 4 calls in
		// the last day are under a limit of 5 a day, and the 1 of the
		// last minute is under a limit of 2 a minute.
		{"two rate_limits, each its window", Constraint{Kind: ConstraintRateLimit, Limit: 2, Window: time.Minute},
			Facts{RecentCalls: map[time.Duration]int{time.Minute: 1, 24 * time.Hour: 4}}, ""},
		{"two rate_limits, the short one reached", Constraint{Kind: ConstraintRateLimit, Limit: 2, Window: time.Minute},
			Facts{RecentCalls: map[time.Duration]int{time.Minute: 2, 24 * time.Hour: 4}}, "reach the limit of 2"},

		{"recipient_allowlist address and domains", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"Ann@Partner.com", "@corp.com", "acme.org"}},
			Facts{Recipients: []string{"ann@partner.com", "bob@CORP.com", "Cy <cy@acme.org>"}}, ""},
		{"recipient_allowlist other address", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"ann@partner.com"}},
			Facts{Recipients: []string{"bob@partner.com"}}, "bob@partner.com is not on the allowlist"},
		{"recipient_allowlist subdomain is not the domain", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"@corp.com"}},
			Facts{Recipients: []string{"bob@eng.corp.com"}}, "not on the allowlist"},
		{"recipient_allowlist evil", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"corp.com"}},
			Facts{Recipients: []string{"ann@corp.com", "bob@evil.com"}}, "bob@evil.com is not on the allowlist"},
		{"recipient_allowlist quoted local part", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"ann@corp.com", "corp.com"}},
			Facts{Recipients: []string{`"ann@corp.com"@evil.com`}}, "is not on the allowlist"},
		{"recipient_allowlist garbage", Constraint{Kind: ConstraintRecipientAllowlist, Values: []string{"corp.com"}},
			Facts{Recipients: []string{"<<>>"}}, "not an email address"},

		{"domain_allowlist holds", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"api.stripe.com", "Example.org"}},
			Facts{URLs: []string{"https://api.stripe.com/v1", "http://www.example.org:8080/x"}, Recipients: []string{"a@mail.example.org"}}, ""},
		{"domain_allowlist other host", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"api.stripe.com"}},
			Facts{URLs: []string{"https://stripe.com/"}}, "is not on the allowlist"},
		{"domain_allowlist recipient", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"example.org"}},
			Facts{Recipients: []string{"a@example.net"}}, "domain example.net"},
		{"domain_allowlist unparsable URL", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"example.org"}},
			Facts{URLs: []string{"https://example.org\\@evil.com/"}}, "not a URL"},
		{"domain_allowlist control character", Constraint{Kind: ConstraintDomainAllowlist, Values: []string{"example.org"}},
			Facts{URLs: []string{"https://example.org/\x00"}}, "not a URL"},

		{"expires_at before", Constraint{Kind: ConstraintExpiresAt, At: t0}, Facts{Now: t0.Add(-time.Second)}, ""},
		{"expires_at at", Constraint{Kind: ConstraintExpiresAt, At: t0}, Facts{Now: t0}, "expired at 2026-03-01T12:00:00Z"},
		{"expires_at after", Constraint{Kind: ConstraintExpiresAt, At: t0}, Facts{Now: t0.Add(time.Hour)}, "expired"},
		{"expires_at unknown now", Constraint{Kind: ConstraintExpiresAt, At: t0}, Facts{}, "time is not known"},

		{"requires_witness two", Constraint{Kind: ConstraintRequiresWitness}, Facts{Approvers: []string{"u1", "u2"}}, ""},
		{"requires_witness one twice", Constraint{Kind: ConstraintRequiresWitness}, Facts{Approvers: []string{"u1", "u1", " "}}, "1 distinct approver(s)"},
		{"requires_witness none", Constraint{Kind: ConstraintRequiresWitness}, Facts{}, "0 distinct approver(s)"},

		{"redaction_rules never breaks", Constraint{Kind: ConstraintRedactionRules, Values: []string{"body"}}, Facts{}, ""},

		{"malformed constraint fails closed", Constraint{Kind: ConstraintMaxAmount}, Facts{Amount: amount(1)}, "malformed"},
		{"unknown kind fails closed", Constraint{Kind: "be_nice"}, Facts{}, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]Constraint{c.c}, c.f)
			if c.wantReason == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Check = %v, want a *Violation", err)
			}
			if v.Constraint != c.c.Kind || !strings.Contains(v.Reason, c.wantReason) {
				t.Errorf("Check = %+v, want constraint %q, reason containing %q", v, c.c.Kind, c.wantReason)
			}
		})
	}
}

func TestCheck_FirstViolationWins(t *testing.T) {
	cs := []Constraint{
		{Kind: ConstraintStagingOnly},
		{Kind: ConstraintRecipientAllowlist, Values: []string{"corp.com"}},
		{Kind: ConstraintMaxAmount, Amount: 1},
	}
	f := Facts{Environment: "staging", Recipients: []string{"bob@evil.com"}, Amount: amount(5)}
	err := Check(cs, f)
	if err == nil || err.Error() != "constraint recipient_allowlist: bob@evil.com is not on the allowlist" {
		t.Fatalf("Check = %v", err)
	}
	if err := Check(nil, f); err != nil {
		t.Errorf("no constraints: %v", err)
	}
}

func TestDryRun(t *testing.T) {
	if DryRun(nil) || DryRun([]Constraint{{Kind: ConstraintStagingOnly}}) {
		t.Error("dry run without dry_run_only")
	}
	if !DryRun([]Constraint{{Kind: ConstraintStagingOnly}, {Kind: ConstraintDryRunOnly}}) {
		t.Error("no dry run with dry_run_only")
	}
}

func TestRedact(t *testing.T) {
	doc := map[string]any{
		"body":  "secret",
		"to":    "ann@corp.com",
		"payee": map[string]any{"account": "DE89", "name": "Acme"},
		"items": []any{map[string]any{"sku": "x"}},
		"note":  "kept",
	}
	before := deepCopy(doc)
	cs := []Constraint{
		{Kind: ConstraintRedactionRules, Values: []string{"body", "payee.account", "missing", "payee.missing.deeper", "note.inner"}},
		{Kind: ConstraintMaxAmount, Amount: 1, Values: []string{"to"}}, // not a redaction rule
	}
	got := Redact(doc, cs)
	want := map[string]any{
		"body":  Redacted,
		"to":    "ann@corp.com",
		"payee": map[string]any{"account": Redacted, "name": "Acme"},
		"items": []any{map[string]any{"sku": "x"}},
		"note":  "kept",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Redact = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(doc, before) {
		t.Errorf("Redact changed its input: %v", doc)
	}
	// The copy is deep: changing it leaves the input alone.
	got["items"].([]any)[0].(map[string]any)["sku"] = "changed"
	if doc["items"].([]any)[0].(map[string]any)["sku"] != "x" {
		t.Error("Redact shares nested values with its input")
	}
	if Redact(nil, cs) != nil {
		t.Error("Redact(nil) is not nil")
	}
	whole := Redact(doc, []Constraint{{Kind: ConstraintRedactionRules, Values: []string{"payee"}}})
	if whole["payee"] != Redacted {
		t.Errorf("redacting an object: %v", whole["payee"])
	}
}

func TestViolation_Error(t *testing.T) {
	v := &Violation{Constraint: ConstraintRecipientAllowlist, Reason: "bob@evil.com is not on the allowlist"}
	if got := v.Error(); got != "constraint recipient_allowlist: bob@evil.com is not on the allowlist" {
		t.Errorf("Error() = %q", got)
	}
}
