package canonjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// The RFC 8785 examples and the corners of the format.
func TestTransform(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b":2,"a":1}`, `{"a":1,"b":2}`},
		{` { "a" : [ 1 , 2 , { "d" : null , "c" : true } ] } `, `{"a":[1,2,{"c":true,"d":null}]}`},
		{`{}`, `{}`}, {`[]`, `[]`}, {`""`, `""`},
		{`"\u20ac\/\u0041\n\u001f\""`, "\"€/A\\n\\u001f\\\"\""},
		{`"\ud83d\ude00"`, `"😀"`},
		{`-0`, `0`}, {`1.0`, `1`}, {`1e21`, `1e+21`}, {`1e20`, `100000000000000000000`},
		{`0.000001`, `0.000001`}, {`0.0000001`, `1e-7`}, {`-1.5E-10`, `-1.5e-10`},
		{`333333333.33333329`, `333333333.3333333`}, {`1E30`, `1e+30`}, {`4.50`, `4.5`},
		{`2e-3`, `0.002`}, {`0.000001234`, `0.000001234`}, {`123456789012345680000`, `123456789012345680000`},
		// RFC 8785 §3.2.3: sorted by UTF-16 code units.
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
	}
	// Objects past the few members sorted by insertion, in and out of
	// order, and one with a duplicate name beyond the first few.
	many, sorted, dup := []string{}, []string{}, []string{}
	for i := 40; i > 0; i-- {
		many = append(many, fmt.Sprintf(`"k%02d":%d`, i, i))
		dup = append(dup, fmt.Sprintf(`"k%02d":%d`, i%39, i))
	}
	for i := 1; i <= 40; i++ {
		sorted = append(sorted, fmt.Sprintf(`"k%02d":%d`, i, i))
	}
	manyIn, manyWant := "{"+strings.Join(many, ",")+"}", "{"+strings.Join(sorted, ",")+"}"
	cases = append(cases, struct{ in, want string }{manyIn, manyWant}, struct{ in, want string }{manyWant, manyWant})
	if _, err := Transform([]byte("{" + strings.Join(dup, ",") + "}")); err == nil {
		t.Error("Transform took 40 members with a duplicate name")
	}
	for _, c := range cases {
		got, err := Transform([]byte(c.in))
		if err != nil {
			t.Errorf("Transform(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Transform(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestTransform_RefusesWhatIsNotIJSON(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,}`, `[1,]`, `{"a":1,"a":2}`, `"\ud800"`, `"\udc00\ud800"`, "\"\xff\"", `01`, `1.`, `.5`, `1e`, `1e400`,
		`-`, `tru`, `nul`, `"a`, "\"\x01\"", `{"a" 1}`, `[1 2]`, `1 2`, `"\x"`, `"\u12"`, `NaN`,
	} {
		if out, err := Transform([]byte(in)); err == nil {
			t.Errorf("Transform(%q) = %s, want an error", in, out)
		}
	}
}

// Every number class agrees with gowebpki/jcs, the reference the
// verifier was first written against.
func TestAppendNumber_AgreesWithReference(t *testing.T) {
	vals := []float64{0, 1, -1, 0.1, 1e-7, 1e-6, 123e-9, 1e21, 1e20, 9007199254740993, math.MaxFloat64, math.SmallestNonzeroFloat64,
		5e-324, 1.7976931348623157e308, 0.3, 2.5e-8, 12345678.9, 1e100, -1e-100}
	for _, v := range vals {
		b, _ := json.Marshal(v)
		want, err := jcs.Transform(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendNumber(nil, v); !bytes.Equal(got, want) {
			t.Errorf("AppendNumber(%v) = %s, want %s", v, got, want)
		}
	}
}

// FuzzTransform checks the canonical form against gowebpki/jcs on every
// input both accept, and that the form is a fixed point.
func FuzzTransform(f *testing.F) {
	for _, s := range []string{`{"b":[1,2.5,-0.0,1e30],"a":{"y":"\u00e9","x":null}}`, `[true,false,"\n\t\u0007"]`, `{"\ud83d\ude00":1,"\uffff":2}`, `1E-7`, `"\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Transform(in)
		want, refErr := jcs.Transform(in)
		if err != nil {
			return // stricter than the reference is allowed (duplicates, lone surrogates)
		}
		again, err := Transform(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("not a fixed point: %s → %s (%v)", got, again, err)
		}
		if !json.Valid(got) {
			t.Fatalf("invalid output %s", got)
		}
		if refErr == nil && !bytes.Equal(got, want) {
			t.Fatalf("Transform(%q) = %s, reference %s", in, got, want)
		}
	})
}

func BenchmarkTransform(b *testing.B) {
	in := []byte(`{"receipt_id":"0b0f6f9e-2a43-4b9c-9d6e-6b8d7f0c1a2b","workspace_id":"911bac7d-2f7c-4c4b-ac2b-5e8679147337","kind":"execution","outcome":"auto","proposal_id":"07296b5b-e283-4fe3-9461-1ebde6ba656b","actor":{"kind":"agent","user_id":"cc938c4f-4805-4c66-8d40-ef047e40cefd","token_id":"0115d948-e196-49c1-b130-8ce72ce056d2"},"action_class":"tool.call.local","tool":"records.put","decision_at_propose":{"state":"allowed","disposition":"auto-apply","layers":[{"layer":"scope","state":"allowed","reason":"the conversation applies changes automatically"},{"layer":"contract","state":"allowed","reason":"medium risk"}]},"arguments":{"collection":"bench","key":"k1","value":{"n":1}},"tools_hash":"3f1c","rationale":"benchmark: record a value for later","time":"2026-11-22T08:29:54.170Z"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Transform(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReference(b *testing.B) {
	in := []byte(`{"receipt_id":"0b0f6f9e-2a43-4b9c-9d6e-6b8d7f0c1a2b","workspace_id":"911bac7d-2f7c-4c4b-ac2b-5e8679147337","kind":"execution","outcome":"auto","proposal_id":"07296b5b-e283-4fe3-9461-1ebde6ba656b","actor":{"kind":"agent","user_id":"cc938c4f-4805-4c66-8d40-ef047e40cefd","token_id":"0115d948-e196-49c1-b130-8ce72ce056d2"},"action_class":"tool.call.local","tool":"records.put","decision_at_propose":{"state":"allowed","disposition":"auto-apply","layers":[{"layer":"scope","state":"allowed","reason":"the conversation applies changes automatically"},{"layer":"contract","state":"allowed","reason":"medium risk"}]},"arguments":{"collection":"bench","key":"k1","value":{"n":1}},"tools_hash":"3f1c","rationale":"benchmark: record a value for later","time":"2026-11-22T08:29:54.170Z"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jcs.Transform(in); err != nil {
			b.Fatal(err)
		}
	}
}

// Append writes after what dst holds, leaves dst as it was on an error,
// and a parser reused after a refused document (the pool) canonicalises
// the next one as a fresh one would.
func TestAppend_ReusesItsBuffersWithoutCarryingAnythingOver(t *testing.T) {
	dst := []byte("prefix:")
	out, err := Append(dst, []byte(`{"b":{"y":1,"x":"\n"},"a":[1.0]}`))
	if err != nil || string(out) != `prefix:{"a":[1],"b":{"x":"\n","y":1}}` {
		t.Fatalf("Append = %q, %v", out, err)
	}
	for range 100 {
		bad, err := Append([]byte("kept"), []byte(`{"z":{"q":1,"p":[`))
		if err == nil || string(bad) != "kept" {
			t.Fatalf("Append of a truncated document = %q, %v; want the error and dst as it was", bad, err)
		}
		got, err := Append(nil, []byte(`{"d":1,"c":{"f":2,"e":3}}`))
		if err != nil || string(got) != `{"c":{"e":3,"f":2},"d":1}` {
			t.Fatalf("Append after a refused document = %q, %v", got, err)
		}
	}
	if raceEnabled {
		return // the pool drops buffers at random under the race detector
	}
	doc := []byte(`{"b":{"y":1,"x":"a"},"a":[1,2,3],"c":"\u00e9"}`)
	if n := testing.AllocsPerRun(100, func() { dst, _ = Append(dst[:0], doc) }); n > 0 {
		t.Errorf("Append into a buffer with room allocates %.0f times; want 0", n)
	}
}
