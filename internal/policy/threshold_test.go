package policy

import (
	"encoding/json"
	"math"
	"testing"
)

func TestParseThreshold(t *testing.T) {
	cases := []struct {
		in      string
		want    Threshold
		wantErr bool
	}{
		{"amount > 10000", Threshold{"amount", ">", 10000}, false},
		{"amount >= 10000", Threshold{"amount", ">=", 10000}, false},
		{"amount < 0.5", Threshold{"amount", "<", 0.5}, false},
		{"amount <= -3", Threshold{"amount", "<=", -3}, false},
		{"amount == 7", Threshold{"amount", "==", 7}, false},
		{"amount>10000", Threshold{"amount", ">", 10000}, false},
		{"  payee.amount  >  1e4 ", Threshold{"payee.amount", ">", 10000}, false},
		{"count(keys) > 50", Threshold{"count(keys)", ">", 50}, false},
		{"count( keys ) >= 50", Threshold{"count(keys)", ">=", 50}, false},
		{"count(batch.items) > 2", Threshold{"count(batch.items)", ">", 2}, false},
		{"", Threshold{}, true},
		{"amount", Threshold{}, true},
		{"amount 10000", Threshold{}, true},
		{"> 10000", Threshold{}, true},
		{"amount >", Threshold{}, true},
		{"amount != 5", Threshold{}, true},
		{"amount = 5", Threshold{}, true},
		{"amount => 5", Threshold{}, true},
		{"amount >> 5", Threshold{}, true},
		{"amount > ten", Threshold{}, true},
		{"amount > NaN", Threshold{}, true},
		{"amount > Inf", Threshold{}, true},
		{"the amount > 5", Threshold{}, true},
		{"count(keys > 5", Threshold{}, true},
		{"count() > 5", Threshold{}, true},
		{"count(a b) > 5", Threshold{}, true},
		{"amount..x > 5", Threshold{}, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseThreshold(c.in)
			if got != c.want || (err != nil) != c.wantErr {
				t.Fatalf("ParseThreshold(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.wantErr)
			}
			if err != nil {
				return
			}
			again, err := ParseThreshold(got.String())
			if err != nil || again != got {
				t.Errorf("round trip of %q through %q = %+v, %v", c.in, got.String(), again, err)
			}
		})
	}
}

func TestThreshold_String(t *testing.T) {
	for in, want := range map[string]string{
		"amount>10000":       "amount > 10000",
		"count( keys )>=50":  "count(keys) >= 50",
		"x == 0.25":          "x == 0.25",
		"big > 1e21":         "big > 1000000000000000000000",
		"payee.amount<=-2.5": "payee.amount <= -2.5",
	} {
		th, err := ParseThreshold(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := th.String(); got != want {
			t.Errorf("%q.String() = %q, want %q", in, got, want)
		}
	}
}

func TestThreshold_Exceeded(t *testing.T) {
	must := func(s string) Threshold {
		th, err := ParseThreshold(s)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	cases := []struct {
		name    string
		th      Threshold
		args    map[string]any
		want    bool
		wantErr bool
	}{
		{"> over", must("amount > 10000"), map[string]any{"amount": 10000.01}, true, false},
		{"> equal", must("amount > 10000"), map[string]any{"amount": 10000.0}, false, false},
		{">= equal", must("amount >= 10000"), map[string]any{"amount": 10000.0}, true, false},
		{">= under", must("amount >= 10000"), map[string]any{"amount": 9999.0}, false, false},
		{"< under", must("amount < 10"), map[string]any{"amount": 9.0}, true, false},
		{"< equal", must("amount < 10"), map[string]any{"amount": 10.0}, false, false},
		{"<= equal", must("amount <= 10"), map[string]any{"amount": 10.0}, true, false},
		{"<= over", must("amount <= 10"), map[string]any{"amount": 11.0}, false, false},
		{"== equal", must("amount == 10"), map[string]any{"amount": 10.0}, true, false},
		{"== other", must("amount == 10"), map[string]any{"amount": 10.5}, false, false},
		{"json.Number", must("amount > 10000"), map[string]any{"amount": json.Number("20000")}, true, false},
		{"int", must("amount > 10000"), map[string]any{"amount": 20000}, true, false},
		{"uint", must("amount > 10000"), map[string]any{"amount": uint(2)}, false, false},
		{"nested", must("payee.amount > 5"), map[string]any{"payee": map[string]any{"amount": 6.0}}, true, false},
		{"missing", must("amount > 10000"), map[string]any{"other": 1.0}, false, false},
		{"missing nested", must("payee.amount > 5"), map[string]any{"payee": "acme"}, false, false},
		{"nil args", must("amount > 10000"), nil, false, false},
		{"string", must("amount > 10000"), map[string]any{"amount": "20000"}, false, true},
		{"bool", must("amount > 10000"), map[string]any{"amount": true}, false, true},
		{"null", must("amount > 10000"), map[string]any{"amount": nil}, false, true},
		{"bad json.Number", must("amount > 10000"), map[string]any{"amount": json.Number("lots")}, false, true},
		{"NaN", must("amount > 10000"), map[string]any{"amount": math.NaN()}, false, true},
		{"infinity", must("amount > 10000"), map[string]any{"amount": math.Inf(1)}, false, true},
		{"count over", must("count(keys) > 2"), map[string]any{"keys": []any{"a", "b", "c"}}, true, false},
		{"count equal", must("count(keys) > 2"), map[string]any{"keys": []any{"a", "b"}}, false, false},
		{"count typed slice", must("count(keys) >= 2"), map[string]any{"keys": []string{"a", "b"}}, true, false},
		{"count missing", must("count(keys) > 2"), map[string]any{}, false, false},
		{"count of a number", must("count(keys) > 2"), map[string]any{"keys": 3.0}, false, true},
		{"count of a string", must("count(keys) > 2"), map[string]any{"keys": "abc"}, false, true},
		{"count of null", must("count(keys) > 2"), map[string]any{"keys": nil}, false, true},
		{"zero threshold", Threshold{}, map[string]any{"amount": 1.0}, false, true},
		{"unknown op", Threshold{"amount", "!=", 1}, map[string]any{"amount": 2.0}, false, true},
		{"bad field", Threshold{"a b", ">", 1}, map[string]any{"a b": 2.0}, false, true},
		{"NaN value", Threshold{"amount", ">", math.NaN()}, map[string]any{"amount": 2.0}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.th.Exceeded(c.args)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("%+v.Exceeded(%v) = %v, %v; want %v, error %v", c.th, c.args, got, err, c.want, c.wantErr)
			}
		})
	}
}
