package core

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

// mustParseSelector is ParseSelector for values a test knows are valid.
func mustParseSelector(tb testing.TB, s string) Selector {
	tb.Helper()
	sel, err := ParseSelector(s)
	if err != nil {
		tb.Fatalf("ParseSelector(%q): %v", s, err)
	}
	return sel
}

// assertSafeError checks that err is a *muster.Error with code want whose message does
// not repeat the distinctive parts of input.
func assertSafeError(t *testing.T, input string, err error, want muster.Code) {
	t.Helper()
	var e *muster.Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: err = %v, want *Error with code %s", input, err, want)
	}
	if e.Code != want {
		t.Fatalf("%q: code = %s, want %s", input, e.Code, want)
	}
	body := strings.TrimPrefix(input, LeaseScheme)
	for tok := range strings.SplitSeq(body, "/") {
		if len(tok) >= 3 && !strings.Contains(LeaseScheme+"***", tok) && strings.Contains(e.Message, tok) {
			t.Errorf("%q: message %q echoes input", input, e.Message)
		}
	}
}

// The seed's lists (seed 000, section 1), verbatim.
var (
	seedMustAccept = []string{
		"lease://acme/renderers/document-123",
		"lease://acme/renderers/*",
		"lease://acme/*/document-123",
		"lease://acme/*/*",
		"lease://*/renderers/*",
		"lease://*/*/*",
		"lease://acme/**",
		"lease://**",
	}
	seedMustReject = []string{
		"lease://acme/renderers",
		"lease://acme/renderers/document-123/extra",
		"lease://acme/renderers/doc*",
		"lease://acme//document-123",
		"notice://acme/renderers/*",
	}
)

func TestParseSelector_SeedAccept(t *testing.T) {
	for _, s := range seedMustAccept {
		t.Run(s, func(t *testing.T) {
			sel := mustParseSelector(t, s)
			if got := sel.String(); got != s {
				t.Errorf("String() = %q, want %q", got, s)
			}
		})
	}
}

func TestParseSelector_SeedReject(t *testing.T) {
	for _, s := range seedMustReject {
		t.Run(s, func(t *testing.T) {
			_, err := ParseSelector(s)
			assertSafeError(t, s, err, muster.CodeInvalidSelector)
		})
	}
}

// TestParseSelector_Matrix covers all 8 literal-or-* forms of a route.
func TestParseSelector_Matrix(t *testing.T) {
	lit := [3]string{"acme", "renderers", "doc-1"}
	for mask := range 8 {
		var f [3]string
		for i := range 3 {
			f[i] = lit[i]
			if mask&(1<<i) != 0 {
				f[i] = "*"
			}
		}
		s := LeaseScheme + strings.Join(f[:], "/")
		t.Run(s, func(t *testing.T) {
			sel := mustParseSelector(t, s)
			if got, want := sel.IsExact(), mask == 0; got != want {
				t.Errorf("IsExact() = %v, want %v", got, want)
			}
			if got, want := sel.Forms(), [][3]string{f}; !reflect.DeepEqual(got, want) {
				t.Errorf("Forms() = %q, want %q", got, want)
			}
			r, ok := sel.Route()
			if ok != (mask == 0) || ok && r.String() != s {
				t.Errorf("Route() = %v, %v", r, ok)
			}
			if _, err := ParseRoute(s); (err == nil) != (mask == 0) {
				t.Errorf("ParseRoute: err = %v", err)
			}
		})
	}
}

func TestParseSelector_DoubleStar(t *testing.T) {
	for _, tt := range []struct {
		s     string
		forms [][3]string // nil: rejected
	}{
		{"lease://**", [][3]string{{"*", "*", "*"}}},
		{"lease://acme/**", [][3]string{{"acme", "*", "*"}}},
		{"lease://**/doc", [][3]string{{"*", "*", "doc"}}},
		{"lease://a/**/c", [][3]string{{"a", "*", "c"}}},
		{"lease://**/a/**", [][3]string{{"a", "*", "*"}, {"*", "a", "*"}, {"*", "*", "a"}}},
		{"lease://a/b/c/**", [][3]string{{"a", "b", "c"}}},
		{"lease://**/a/b/c", [][3]string{{"a", "b", "c"}}},
		{"lease://**/a/**/b/**/c/**", [][3]string{{"a", "b", "c"}}},
		{"lease://a/**/b/**", [][3]string{{"a", "b", "*"}, {"a", "*", "b"}}},
		{"lease://**/a/b/**", [][3]string{{"a", "b", "*"}, {"*", "a", "b"}}},
		{"lease://*/**", [][3]string{{"*", "*", "*"}}},
		{"lease://**/*/**", [][3]string{{"*", "*", "*"}}},
		{"lease://*/**/*/*", [][3]string{{"*", "*", "*"}}},
		{"lease://**/**", nil},
		{"lease://a/**/**/b", nil},
		{"lease://**/**/a", nil},
		{"lease://a/b/c/d/**", nil},
		{"lease://**/a/b/c/d", nil},
		{"lease://a/**/b/c/d", nil},
		{"lease://*/*/*/*/**", nil},
		{"lease://***", nil},
		{"lease://a/**b/c", nil},
		{"lease://*a/b/c", nil},
		{"lease://a/*/*/*", nil},
		{"lease://*/*", nil},
		{"lease://**/a/**/b/**/c/**/d", nil},
	} {
		t.Run(tt.s, func(t *testing.T) {
			sel, err := ParseSelector(tt.s)
			if tt.forms == nil {
				assertSafeError(t, tt.s, err, muster.CodeInvalidSelector)
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got := sel.Forms(); !reflect.DeepEqual(got, tt.forms) {
				t.Errorf("Forms() = %q, want %q", got, tt.forms)
			}
			if sel.IsExact() {
				t.Error("IsExact() = true for a ** selector")
			}
			if _, err := ParseRoute(tt.s); muster.ErrorCode(err) != muster.CodeInvalidRoute {
				t.Errorf("ParseRoute: err = %v, want invalid_route", err)
			}
		})
	}
}

func TestParseSelector_Bounds(t *testing.T) {
	seg128 := strings.Repeat("x", muster.MaxSegmentLen)
	seg129 := seg128 + "x"
	for _, tt := range []struct {
		name string
		s    string
		ok   bool
	}{
		{"Empty", "", false},
		{"SchemeOnly", "lease://", false},
		{"MissingScheme", "acme/renderers/doc", false},
		{"OneSlash", "lease:/acme/renderers/doc", false},
		{"LeaseColonSlash", "lease:/", false},
		{"UppercaseScheme", "LEASE://acme/renderers/doc", false},
		{"MixedCaseScheme", "Lease://acme/renderers/doc", false},
		{"OtherScheme", "fleet://acme/renderers/doc", false},
		{"LeadingSlash", "lease:///acme/renderers/doc", false},
		{"TrailingSlash", "lease://acme/renderers/doc/", false},
		{"TrailingSlashStar", "lease://acme/**/", false},
		{"Segment128", "lease://acme/" + seg128 + "/doc", true},
		{"Segment129", "lease://acme/" + seg129 + "/doc", false},
		{"Segment129InDoubleStar", "lease://**/" + seg129, false},
		{"TooLong", "lease://a/b/" + strings.Repeat("c", MaxSelectorLen), false},
		{"TooLongSlashes", "lease://" + strings.Repeat("a/", 300) + "a", false},
		{"ManySegments", "lease://a/b/c/d/e/f/g/h/i", false},
		{"NUL", "lease://acme/ren\x00derers/doc", false},
		{"Tab", "lease://acme/renderers/\tdoc", false},
		{"Unit1F", "lease://acme/renderers/doc\x1f", false},
		{"DEL", "lease://acme/renderers/doc\x7f", false},
		{"C1NEL", "lease://acme/renderers/doc\u0085", false},
		{"C1Last", "lease://acme/renderers/doc\u009f", false},
		{"InvalidUTF8", "lease://acme/renderers/doc\xff", false},
		{"TruncatedUTF8", "lease://acme/renderers/doc\xc3", false},
		{"Surrogate", "lease://acme/renderers/\xed\xa0\x80", false},
		{"Space", "lease://acme/render ers/doc", true},
		{"NBSP", "lease://acme/renderers/doc\u00a0", true},
		{"Unicode", "lease://acmé/日本/doc-1", true},
		{"Punctuation", "lease://a.b/c:d/e#f?g=h", true},
		// A path-normalising proxy resolves dot segments before the broker
		// sees the request: no route or selector may have one.
		{"DotSegment", "lease://acme/./doc", false},
		{"DotDotSegment", "lease://acme/../doc", false},
		{"DotDotRealm", "lease://../renderers/doc", false},
		{"DotDotResource", "lease://acme/renderers/..", false},
		{"DotInDoubleStar", "lease://**/.", false},
		{"DotDotBeforeDoubleStar", "lease://../**", false},
		{"DotDotWildcard", "lease://acme/../*", false},
		{"ThreeDots", "lease://acme/.../doc", true},
		{"DotPrefix", "lease://acme/.hidden/doc", true},
		{"DotsPrefix", "lease://acme/..x/doc", true},
		{"DotSuffix", "lease://acme/x./doc", true},
		{"EscapedDotsAreText", "lease://acme/%2e%2e/doc", true},
		{"PercentNotHex", "lease://acme/100%zz/doc", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSelector(tt.s)
			if tt.ok {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			assertSafeError(t, tt.s, err, muster.CodeInvalidSelector)
			if _, err := ParseRoute(tt.s); muster.ErrorCode(err) != muster.CodeInvalidRoute {
				t.Errorf("ParseRoute: err = %v, want invalid_route", err)
			}
		})
	}
}

// TestParseSelector_Identity: no canonicalization.
func TestParseSelector_Identity(t *testing.T) {
	a := mustParseSelector(t, "lease://acme/**")
	b := mustParseSelector(t, "lease://acme/*/*")
	if a.String() == b.String() {
		t.Errorf("String() equal: %q", a.String())
	}
	if !reflect.DeepEqual(a.Forms(), b.Forms()) {
		t.Errorf("Forms() differ: %q vs %q", a.Forms(), b.Forms())
	}
	if got, want := a.Segments(), []string{"acme", "**"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Segments() = %q, want %q", got, want)
	}
}

func TestParseRoute(t *testing.T) {
	r, err := ParseRoute("lease://acme/renderers/document-123")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Route{"acme", "renderers", "document-123"}); r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if got, want := r.String(), "lease://acme/renderers/document-123"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := r.Key(), "acme/renderers/document-123"; got != want {
		t.Errorf("Key() = %q, want %q", got, want)
	}
	for _, s := range append(append([]string{}, seedMustReject...),
		"lease://acme/renderers/*", "lease://*/*/*", "lease://**", "lease://a/b/c/**",
		"lease://a/b/**", "lease://a/**", "lease://acme/renderers/doc*", "") {
		t.Run(s, func(t *testing.T) {
			_, err := ParseRoute(s)
			assertSafeError(t, s, err, muster.CodeInvalidRoute)
		})
	}
}

func TestNewRoute(t *testing.T) {
	r, err := NewRoute("acme", "renderers", "doc-1")
	if err != nil || r != (Route{"acme", "renderers", "doc-1"}) {
		t.Fatalf("got %+v, %v", r, err)
	}
	for _, tt := range []struct {
		name string
		segs [3]string
	}{
		{"Star", [3]string{"acme", "*", "doc"}},
		{"DoubleStar", [3]string{"**", "renderers", "doc"}},
		{"PartialStar", [3]string{"acme", "renderers", "doc*"}},
		{"Empty", [3]string{"acme", "", "doc"}},
		{"Slash", [3]string{"acme", "render/ers", "doc"}},
		{"Control", [3]string{"acme", "renderers", "doc\n"}},
		{"InvalidUTF8", [3]string{"\xfe", "renderers", "doc"}},
		{"TooLong", [3]string{"acme", "renderers", strings.Repeat("d", muster.MaxSegmentLen+1)}},
		{"Dot", [3]string{"acme", ".", "doc"}},
		{"DotDot", [3]string{"..", "renderers", "doc"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRoute(tt.segs[0], tt.segs[1], tt.segs[2])
			assertSafeError(t, strings.Join(tt.segs[:], "/"), err, muster.CodeInvalidRoute)
		})
	}
}

func TestRoute_Selector(t *testing.T) {
	r := Route{"acme", "renderers", "doc-1"}
	got := r.Selector()
	want := mustParseSelector(t, r.String())
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Route.Selector() = %+v, want %+v", got, want)
	}
}

func TestSelector_Matches(t *testing.T) {
	routes := []Route{
		{"acme", "renderers", "doc-1"},
		{"acme", "encoders", "doc-1"},
		{"other", "renderers", "doc-1"},
		{"renderers", "acme", "acme"},
	}
	for _, tt := range []struct {
		sel  string
		want []bool // per route
	}{
		{"lease://acme/renderers/doc-1", []bool{true, false, false, false}},
		{"lease://acme/renderers/*", []bool{true, false, false, false}},
		{"lease://acme/*/doc-1", []bool{true, true, false, false}},
		{"lease://*/renderers/*", []bool{true, false, true, false}},
		{"lease://*/*/*", []bool{true, true, true, true}},
		{"lease://**", []bool{true, true, true, true}},
		{"lease://acme/**", []bool{true, true, false, false}},
		{"lease://**/acme/**", []bool{true, true, false, true}},
		{"lease://**/doc-1", []bool{true, true, true, false}},
		{"lease://a/b/c/**", []bool{false, false, false, false}},
		{"lease://acme/renderers/doc-1/**", []bool{true, false, false, false}},
	} {
		sel := mustParseSelector(t, tt.sel)
		for i, r := range routes {
			if got := sel.Matches(r); got != tt.want[i] {
				t.Errorf("%s.Matches(%s) = %v, want %v", tt.sel, r, got, tt.want[i])
			}
			if got := sel.MatchesKey(r.Key()); got != tt.want[i] {
				t.Errorf("%s.MatchesKey(%s) = %v, want %v", tt.sel, r.Key(), got, tt.want[i])
			}
		}
	}
}

func TestSelector_MatchesKeyMalformed(t *testing.T) {
	sel := mustParseSelector(t, "lease://**")
	for _, key := range []string{"", "a", "a/b", "a/b/c/d", "/b/c", "a//c", "a/b/", "a/b/c/"} {
		if sel.MatchesKey(key) {
			t.Errorf("MatchesKey(%q) = true", key)
		}
	}
	if !sel.MatchesKey("a/b/c") {
		t.Error(`MatchesKey("a/b/c") = false`)
	}
}

func TestSelector_Zero(t *testing.T) {
	var sel Selector
	if sel.Matches(Route{"a", "b", "c"}) || sel.MatchesKey("a/b/c") || sel.IsExact() {
		t.Error("zero Selector matches")
	}
}

func TestSelector_Prefix(t *testing.T) {
	for _, tt := range []struct{ sel, want string }{
		{"lease://acme/renderers/doc-1", "acme/renderers/doc-1"},
		{"lease://acme/renderers/*", "acme/renderers/"},
		{"lease://acme/*/doc-1", "acme/"},
		{"lease://acme/**", "acme/"},
		{"lease://*/x/*", ""},
		{"lease://**", ""},
		{"lease://**/acme/**", ""},
		{"lease://a/**/b/**", "a/"},
		{"lease://ab/**/ac/**", "ab/"},
		{"lease://a/b/c/**", "a/b/c"},
	} {
		if got := mustParseSelector(t, tt.sel).Prefix(); got != tt.want {
			t.Errorf("%s.Prefix() = %q, want %q", tt.sel, got, tt.want)
		}
	}
}

func TestSelector_CopiesAreIndependent(t *testing.T) {
	sel := mustParseSelector(t, "lease://acme/*/*")
	sel.Forms()[0][0] = "x"
	sel.Segments()[0] = "x"
	if !sel.Matches(Route{"acme", "b", "c"}) {
		t.Error("mutating Forms() or Segments() changed the selector")
	}
}

func TestSelector_MatchesDoesNotAllocate(t *testing.T) {
	sel := mustParseSelector(t, "lease://**/doc-1/**")
	r := Route{"acme", "renderers", "doc-1"}
	key := r.Key()
	if n := testing.AllocsPerRun(100, func() { sel.Matches(r) }); n != 0 {
		t.Errorf("Matches allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { sel.MatchesKey(key) }); n != 0 {
		t.Errorf("MatchesKey allocates %v times", n)
	}
}

var selectorBenchSink bool

func BenchmarkMatches(b *testing.B) {
	r := Route{"acme", "renderers", "document-123"}
	for _, s := range []string{"lease://acme/renderers/document-123", "lease://acme/renderers/*", "lease://**/document-123/**"} {
		sel := mustParseSelector(b, s)
		b.Run(s, func(b *testing.B) {
			for b.Loop() {
				selectorBenchSink = sel.Matches(r)
			}
		})
	}
}

func BenchmarkMatchesKey(b *testing.B) {
	key := "acme/renderers/document-123"
	for _, s := range []string{"lease://acme/renderers/document-123", "lease://acme/renderers/*", "lease://**/document-123/**"} {
		sel := mustParseSelector(b, s)
		b.Run(s, func(b *testing.B) {
			for b.Loop() {
				selectorBenchSink = sel.MatchesKey(key)
			}
		})
	}
}

func BenchmarkParseSelector(b *testing.B) {
	for _, s := range []string{"lease://acme/renderers/document-123", "lease://acme/renderers/*", "lease://**/document-123/**"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseSelector(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseRoute(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRoute("lease://acme/renderers/document-123"); err != nil {
			b.Fatal(err)
		}
	}
}
