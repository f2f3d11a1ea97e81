package fleetstore

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

func TestCheckSpecShape(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	cases := []struct {
		name, spec string
		limit      string // "" when the spec is within every limit
	}{
		{"Scalar", `1`, ""},
		{"StringWithBrackets", `"[[[[{{{{\"]]]"`, ""},
		{"DepthAtLimitArrays", deep(MaxSpecDepth, "[", "]"), ""},
		{"DepthAtLimitObjects", deep(MaxSpecDepth, `{"a":`, "}"), ""},
		{"DepthBeyondArrays", deep(MaxSpecDepth+1, "[", "]"), "spec depth"},
		{"DepthBeyondObjects", deep(MaxSpecDepth+1, `{"a":`, "}"), "spec depth"},
		{"DepthBeyondMixed", deep(MaxSpecDepth/2+1, `[{"a":`, "}]"), "spec depth"},
		{"Siblings", `[` + strings.Repeat(deep(MaxSpecDepth-1, "[", "]")+",", 50) + `1]`, ""},
		{"ExponentAtLimit", `{"n":[1e999,-1.5E-999,2e+999]}`, ""},
		{"ExponentBeyond", `{"n":[1e1000000]}`, "spec number"},
		{"ExponentLeadingZeros", `1e0001`, "spec number"},
		{"NumberAtLimit", strings.Repeat("9", MaxSpecNumberBytes), ""},
		{"NumberBeyond", strings.Repeat("9", MaxSpecNumberBytes+1), "spec number"},
		{"NumberInString", `"1e1000000"`, ""},
		{"DigitsInKeys", `{"1e1000000":true}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSpec([]byte(tc.spec))
			if tc.limit == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if muster.ErrorCode(err) != muster.CodeInvalidRequest || !strings.Contains(err.Error(), "(limit: "+tc.limit+")") {
				t.Fatalf("got %v, want invalid_request naming %q", err, tc.limit)
			}
		})
	}
}

func TestSchemaNumbersAreBounded(t *testing.T) {
	for _, schema := range []string{`{"maximum":1e1000000}`, `{"enum":[0,1,` + strings.Repeat("7", 65) + `]}`} {
		err := PrecheckSchema([]byte(schema))
		if muster.ErrorCode(err) != muster.CodeInvalidRequest || !strings.Contains(err.Error(), "(limit: schema number)") {
			t.Errorf("%.40s: %v", schema, err)
		}
	}
	if err := PrecheckSchema([]byte(`{"maximum":1e308,"multipleOf":0.001}`)); err != nil {
		t.Errorf("ordinary numbers refused: %v", err)
	}
}

// FuzzCheckSpecShape holds the one-pass scanner to a reference: the value
// decoded with encoding/json, its depth and number literals measured.
func FuzzCheckSpecShape(f *testing.F) {
	for _, s := range []string{`1`, `[[1]]`, `{"a":"\"]"}`, `[1e999,1e1000]`, `"\\\\"`, `[-0.5E+12]`, strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		if !json.Valid(spec) {
			return
		}
		got := checkSpecShape(spec)
		d := json.NewDecoder(bytes.NewReader(spec))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("valid JSON does not decode: %v", err)
		}
		depth, number := measure(v)
		// Both are limits of the one value and the scanner may meet either
		// first: a refusal must name a limit the value breaks, and a value
		// within both must pass.
		switch {
		case got == nil && (depth > MaxSpecDepth || number):
			t.Fatalf("%q passed: depth %d, number beyond the limit %v", spec, depth, number)
		case got == errSpecDepth && depth <= MaxSpecDepth:
			t.Fatalf("%q refused for depth %d", spec, depth)
		case got == errSpecNumber && !number:
			t.Fatalf("%q refused for a number within the limit", spec)
		case got != nil && got != errSpecDepth && got != errSpecNumber:
			t.Fatalf("%q: %v", spec, got)
		}
	})
}

// measure is the reference: the depth of v and whether one of its numbers
// is too big.
func measure(v any) (depth int, bigNumber bool) {
	switch v := v.(type) {
	case json.Number:
		return 0, numberTooBig(v)
	case []any:
		for _, c := range v {
			d, b := measure(c)
			depth, bigNumber = max(depth, d), bigNumber || b
		}
		return depth + 1, bigNumber
	case map[string]any:
		for _, c := range v {
			d, b := measure(c)
			depth, bigNumber = max(depth, d), bigNumber || b
		}
		return depth + 1, bigNumber
	}
	return 0, false
}
