package core

import (
	"reflect"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

// refMatch is the reference matcher: a plain recursive glob of the compiled
// segments over the route's three segments ("*" one, "**" zero or more).
func refMatch(pattern []string, r Route) bool {
	var match func(p, s []string) bool
	match = func(p, s []string) bool {
		switch {
		case len(p) == 0:
			return len(s) == 0
		case p[0] == "**":
			return match(p[1:], s) || len(s) > 0 && match(p, s[1:])
		case len(s) == 0:
			return false
		default:
			return (p[0] == "*" || p[0] == s[0]) && match(p[1:], s[1:])
		}
	}
	return match(pattern, []string{r.Realm, r.Area, r.Resource})
}

func addSelectorSeeds(f *testing.F) {
	for _, s := range seedMustAccept {
		f.Add(s)
	}
	for _, s := range seedMustReject {
		f.Add(s)
	}
	for _, s := range []string{
		"", "lease://", "lease:/", "LEASE://a/b/c", "lease://**/a/**", "lease://**/**",
		"lease://a/b/c/**", "lease://a/**/b/**/c", "lease://a/\x00/c", "lease://a/\xff/c",
		"lease://a/\u0085/c", "lease://a/b/c/d/e/f/g/h", "lease://*/**/*/*",
		"lease://a/./c", "lease://a/../c", "lease://../**", "lease://**/..", "lease://a/.../c",
		"lease://a/.b/c", "lease://a/%2e%2e/c", "lease://a/b/100%zz",
	} {
		f.Add(s)
	}
}

// FuzzParseSelector: no panic; errors are typed; an accepted selector keeps
// its text, re-parses to the same classification, and matches exactly what
// the reference matcher matches among routes built from its literals.
func FuzzParseSelector(f *testing.F) {
	addSelectorSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			if muster.ErrorCode(err) != muster.CodeInvalidSelector {
				t.Fatalf("code = %s", muster.ErrorCode(err))
			}
			if _, err := ParseRoute(s); muster.ErrorCode(err) != muster.CodeInvalidRoute {
				t.Fatalf("ParseRoute accepted an invalid selector: %v", err)
			}
			return
		}
		again := mustParseSelector(t, sel.String())
		if sel.String() != s || !reflect.DeepEqual(sel, again) {
			t.Fatalf("re-parse differs: %+v vs %+v", sel, again)
		}
		checkExactSelector(t, s, sel)
		checkSelectorMatches(t, sel)
	})
}

// checkExactSelector: exact selectors and routes are the same thing.
func checkExactSelector(t *testing.T, s string, sel Selector) {
	r, ok := sel.Route()
	pr, err := ParseRoute(s)
	if ok != sel.IsExact() || ok != (err == nil) {
		t.Fatalf("IsExact %v, Route ok %v, ParseRoute err %v", sel.IsExact(), ok, err)
	}
	if !ok {
		return
	}
	if r != pr || r.String() != s || !reflect.DeepEqual(r.Selector(), sel) || sel.Prefix() != r.Key() {
		t.Fatalf("exact selector and route disagree: %+v, %+v", r, pr)
	}
}

// checkSelectorMatches compares Matches, MatchesKey and the reference on every route
// made of the selector's literals plus one fresh literal, and checks Prefix.
func checkSelectorMatches(t *testing.T, sel Selector) {
	alphabet := []string{"fresh"}
	for _, seg := range sel.Segments() {
		if seg != "*" && seg != "**" {
			alphabet = append(alphabet, seg)
		}
	}
	for _, x := range alphabet {
		for _, y := range alphabet {
			for _, z := range alphabet {
				r := Route{x, y, z}
				want := refMatch(sel.Segments(), r)
				if sel.Matches(r) != want || sel.MatchesKey(r.Key()) != want {
					t.Fatalf("%q on %q: Matches %v, MatchesKey %v, reference %v",
						sel, r, sel.Matches(r), sel.MatchesKey(r.Key()), want)
				}
				if want && !strings.HasPrefix(r.Key(), sel.Prefix()) {
					t.Fatalf("%q: match %q lacks prefix %q", sel, r.Key(), sel.Prefix())
				}
			}
		}
	}
	if !sel.Contains(sel) {
		t.Fatalf("%q does not contain itself", sel)
	}
}

// FuzzParseRoute: no panic; errors are typed; an accepted route prints back
// to its input and agrees with NewRoute and ParseSelector.
func FuzzParseRoute(f *testing.F) {
	addSelectorSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRoute(s)
		if err != nil {
			if muster.ErrorCode(err) != muster.CodeInvalidRoute {
				t.Fatalf("code = %s", muster.ErrorCode(err))
			}
			return
		}
		if r.String() != s {
			t.Fatalf("String() = %q, input %q", r.String(), s)
		}
		if nr, err := NewRoute(r.Realm, r.Area, r.Resource); err != nil || nr != r {
			t.Fatalf("NewRoute = %+v, %v", nr, err)
		}
		sel, err := ParseSelector(s)
		if err != nil || !sel.IsExact() || !sel.Matches(r) {
			t.Fatalf("ParseSelector = %+v, %v", sel, err)
		}
	})
}
