package dump

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/musterhq/muster/fleetstore"
)

// specs exercises the inline and the base64 forms.
var specs = []struct {
	spec   string
	inline bool
}{
	{`{"topic":"golang/go","schedule":"@daily"}`, true},
	{`null`, true}, {`true`, true}, {`[]`, true}, {`0`, true}, {`-0.0`, true},
	{`"h\u00e9llo wörld"`, true},
	{`[12345678901234567890123456789,1e400]`, true},
	{`{"html":"<a>&amp;</a>"}`, true},
	{" {\"a\" : [1, 2.50, 1e3] }\n", false}, // whitespace and a newline
	{"{\n  \"pretty\": true\n}", false},
	{`{"dup":1,"dup":2}`, false}, // the strict parser refuses duplicate names inline
	{"\"caf\xe9\"", false},       // invalid UTF-8 inside a string
	{`"` + strings.Repeat("x", fleetstore.MaxSpecBytes-2) + `"`, true},
	{`"` + strings.Repeat("é", fleetstore.MaxSpecBytes/2-2) + ` "`, true},
	{`[` + strings.Repeat(" ", fleetstore.MaxSpecBytes-2) + `]`, false},
}

func TestLineRoundTrip(t *testing.T) {
	for _, s := range specs {
		if err := fleetstore.CheckSpec([]byte(s.spec)); err != nil {
			t.Fatalf("test spec %.40q is not one Register takes: %v", s.spec, err)
		}
		in := Line{Family: "acmé \"corp\"", Root: "inst-7/monitors", Name: "repo-x-12", Kind: "repo-x", Spec: []byte(s.spec)}
		b := AppendLine(nil, in)
		if bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
			t.Fatalf("line of %.40q is not one line: %.80q", s.spec, b)
		}
		if got := bytes.Contains(b, []byte(`"spec_base64"`)); got == s.inline {
			t.Errorf("spec %.40q: base64 %v, want inline %v", s.spec, got, s.inline)
		}
		out, err := ParseLine(b[:len(b)-1])
		if err != nil {
			t.Fatalf("ParseLine(AppendLine(%.40q)): %v", s.spec, err)
		}
		if out.Family != in.Family || out.Root != in.Root || out.Name != in.Name || out.Kind != in.Kind ||
			!bytes.Equal(out.Spec, in.Spec) || out.Counter != 0 {
			t.Fatalf("round trip of %.40q = %+.80v", s.spec, out)
		}
	}
	c := Line{Family: "f", Root: "r", Counter: fleetstore.MaxCounter}
	b := AppendLine(nil, c)
	if string(b) != `{"family":"f","root":"r","counter":9223372036854775807}`+"\n" {
		t.Fatalf("counter line = %s", b)
	}
	if out, err := ParseLine(b); err != nil || out.Counter != c.Counter || out.Name != "" {
		t.Fatalf("ParseLine(counter line) = %+v, %v", out, err)
	}
}

func TestParseLineRefuses(t *testing.T) {
	const ok = `"family":"f","root":"r"`
	for _, line := range []string{
		``, `[]`, `null`, `{}`, `{` + ok + `}`,
		`{` + ok + `,"counter":0}`,
		`{` + ok + `,"counter":-1}`,
		`{` + ok + `,"counter":1.5}`,
		`{` + ok + `,"counter":9223372036854775808}`,
		`{` + ok + `,"counter":"3"}`,
		`{` + ok + `,"counter":3,"name":"k-1"}`,
		`{` + ok + `,"counter":3,"counter":4}`,
		`{` + ok + `,"counter":3} {}`,
		`{` + ok + `,"counter":3,"extra":1}`,
		`{"family":"f","ROOT":"r","counter":3}`,
		`{"family":"","root":"r","counter":3}`,
		`{"family":"f","root":"R","counter":3}`,
		`{"family":"f","root":"a//b","counter":3}`,
		`{"family":"f\u0000","root":"r","counter":3}`,
		`{"family":null,"root":"r","counter":3}`,
		`{` + ok + `,"name":"k-1","kind":"k"}`,
		`{` + ok + `,"name":"k-1","spec":1}`,
		`{` + ok + `,"name":"k-1","kind":"j","spec":1}`,
		`{` + ok + `,"name":"k-01","kind":"k","spec":1}`,
		`{` + ok + `,"name":"k","kind":"k","spec":1}`,
		`{` + ok + `,"name":"K-1","kind":"K","spec":1}`,
		`{` + ok + `,"name":"k-1","kind":"k","spec":1,"spec_base64":"MQ=="}`,
		`{` + ok + `,"name":"k-1","kind":"k","spec_base64":"MQ"}`,
		`{` + ok + `,"name":"k-1","kind":"k","spec_base64":"ew=="}`, // "{": not JSON
		`{` + ok + `,"name":"k-1","kind":"k","spec":{"a":1,"a":2}}`,
		`{` + ok + `,"name":"k-1","kind":"k","spec":"` + strings.Repeat("x", fleetstore.MaxSpecBytes) + `"}`,
		"{" + ok + ",\"name\":\"k-1\",\"kind\":\"k\",\"spec\":\"\xff\"}",
	} {
		_, err := ParseLine([]byte(line))
		var le *LineError
		if !errors.As(err, &le) {
			t.Errorf("ParseLine(%.100q) = %v, want a *LineError", line, err)
		}
	}
	// null is a spec (JSON null), not a missing one.
	l, err := ParseLine([]byte(`{` + ok + `,"name":"k-1","kind":"k","spec":null}`))
	if err != nil || string(l.Spec) != "null" {
		t.Fatalf("spec null = %q, %v", l.Spec, err)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range specs {
		f.Add(AppendLine(nil, Line{Family: "f", Root: "a/b", Name: "k-1", Kind: "k", Spec: []byte(s.spec)}))
	}
	f.Add([]byte(`{"family":"f","root":"r","counter":3}`))
	f.Add([]byte(`{"family":"f","root":"r","name":"k-1","kind":"k","spec_base64":"MQ=="}`))
	f.Add([]byte(`{"family":"f","root":"r","name":"k-1","kind":"k","spec":{"a":[1,{"b":null}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("refusal %v is not a *LineError", err)
			}
			return
		}
		// What is accepted is what the store takes, and writes back to
		// the same line content.
		if fleetstore.CheckFamily(l.Family) != nil {
			t.Fatalf("accepted family %q", l.Family)
		}
		if l.Name == "" {
			if l.Counter < 1 || l.Counter > fleetstore.MaxCounter {
				t.Fatalf("accepted counter %d", l.Counter)
			}
		} else {
			kind, _, err := fleetstore.ParseMintedName(l.Name)
			if err != nil || kind != l.Kind || l.Counter != 0 {
				t.Fatalf("accepted name %q kind %q counter %d", l.Name, l.Kind, l.Counter)
			}
			if err := fleetstore.CheckSpec(l.Spec); err != nil {
				t.Fatalf("accepted spec %q: %v", l.Spec, err)
			}
		}
		again := AppendLine(nil, l)
		l2, err := ParseLine(again[:len(again)-1])
		if err != nil {
			t.Fatalf("ParseLine(AppendLine(%+v)) = %v", l, err)
		}
		if l2.Family != l.Family || l2.Root != l.Root || l2.Name != l.Name || l2.Kind != l.Kind ||
			l2.Counter != l.Counter || !bytes.Equal(l2.Spec, l.Spec) {
			t.Fatalf("round trip %+v became %+v", l, l2)
		}
	})
}

// FuzzAppendLine: every spec Register takes survives a line byte for byte.
func FuzzAppendLine(f *testing.F) {
	for _, s := range specs {
		f.Add([]byte(s.spec))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		if fleetstore.CheckSpec(spec) != nil {
			return
		}
		b := AppendLine(nil, Line{Family: "f", Root: "r", Name: "k-1", Kind: "k", Spec: spec})
		if bytes.IndexByte(b, '\n') != len(b)-1 {
			t.Fatalf("spec %q breaks the line: %q", spec, b)
		}
		l, err := ParseLine(b[:len(b)-1])
		if err != nil {
			t.Fatalf("spec %q: %v", spec, err)
		}
		if !bytes.Equal(l.Spec, spec) {
			t.Fatalf("spec %q came back %q", spec, l.Spec)
		}
	})
}
