package core

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

func mustParseGrants(tb testing.TB, ss ...string) Grants {
	tb.Helper()
	gs, err := ParseGrants(ss)
	if err != nil {
		tb.Fatalf("ParseGrants(%q): %v", ss, err)
	}
	return gs
}

func TestParseGrant(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want Access // 0: rejected
	}{
		{"lease://acme/renderers/*#read", Read},
		{"lease://acme/renderers/doc-1#write", Write},
		{"lease://**#*", ReadWrite},
		{"lease://a#b/c/d#read", Read}, // "#" is legal inside a segment
		{"fleet://acme#read", Read},
		{"fleet://acme/inst-7/**#*", ReadWrite},
		{"fleet://**/mon#write", Write},
		{"fleet://*#read", Read},
		{"lease://acme/renderers/*", 0},
		{"lease://acme/renderers/*#", 0},
		{"lease://acme/renderers/*#READ", 0},
		{"lease://acme/renderers/*#read,write", 0},
		{"lease://acme/renderers#read", 0},
		{"lease://acme/renderers/doc*#read", 0},
		{"lease://../**#read", 0},
		{"lease://acme/./*#write", 0},
		{"fleet://..#read", 0},
		{"notice://acme/renderers/*#read", 0},
		{"fleet://#read", 0},
		{"fleet://Acme#read", 0},
		{"fleet://acme/#read", 0},
		{"fleet://acme/**/**#read", 0},
		{"fleet://acme.io#read", 0},
		{"fleet://" + strings.Repeat("a/", muster.MaxFleetDepth) + "a#read", 0},
		{"#read", 0},
		{"", 0},
	} {
		t.Run(tt.s, func(t *testing.T) {
			g, err := ParseGrant(tt.s)
			if tt.want == 0 {
				assertSafeError(t, tt.s, err, muster.CodeInvalidRequest)
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if g.Access() != tt.want || g.String() != tt.s {
				t.Errorf("got %s %q, want %s %q", g.Access(), g.String(), tt.want, tt.s)
			}
		})
	}
}

func TestParseGrants_ReportsPosition(t *testing.T) {
	_, err := ParseGrants([]string{"lease://**#read", "lease://secret-realm#read"})
	assertSafeError(t, "lease://secret-realm", err, muster.CodeInvalidRequest)
	if !strings.Contains(err.Error(), "grant 1:") {
		t.Errorf("err = %v, want the position", err)
	}
}

func TestGrants_AllowsLease(t *testing.T) {
	for _, tt := range []struct {
		name   string
		grants []string
		sel    string
		access Access
		want   bool
	}{
		{"StarsCoverDoubleStar", []string{"lease://*/*/*#read"}, "lease://**", Read, true},
		{"DoubleStarCoversStars", []string{"lease://**#read"}, "lease://*/*/*", Read, true},
		{"AreaGrantCoversDoubleStar", []string{"lease://acme/*/*#read"}, "lease://acme/**", Read, true},
		{"AreaGrantNotEverything", []string{"lease://acme/*/*#read"}, "lease://*/*/*", Read, false},
		{"AreaGrantNotOtherRealm", []string{"lease://acme/*/*#read"}, "lease://other/*/*", Read, false},
		{"AreaGrantCoversExact", []string{"lease://acme/*/*#read"}, "lease://acme/renderers/doc-1", Read, true},
		{"PartialGrantsNeverAddUp", []string{"lease://acme/*/*#read", "lease://*/renderers/*#read"}, "lease://*/*/*", Read, false},
		{"PartialGrantsEachCoverTheirOwn", []string{"lease://acme/*/*#read", "lease://*/renderers/*#read"}, "lease://other/renderers/*", Read, true},
		{"ForwardPartialsNotUnioned", []string{"lease://a/*/*#read", "lease://*/a/*#read", "lease://*/*/a#read"}, "lease://**/a/**", Read, false},
		{"AnywhereGrantCoversPosition", []string{"lease://**/a/**#read"}, "lease://*/a/*", Read, true},
		{"AnywhereGrantCoversItself", []string{"lease://**/a/**#read"}, "lease://**/a/**", Read, true},
		{"AnywhereGrantNotAll", []string{"lease://**/a/**#read"}, "lease://*/*/*", Read, false},
		{"AnywhereGrantNotOtherLiteral", []string{"lease://**/a/**#read"}, "lease://b/*/*", Read, false},
		{"AnywhereGrantTwoLiterals", []string{"lease://**/a/**#read"}, "lease://b/a/*", Read, true},
		{"WildRealmCoversAllRealms", []string{"lease://*/renderers/*#read"}, "lease://**/renderers/*", Read, true},
		{"ExactGrantExactRoute", []string{"lease://a/b/c#write"}, "lease://a/b/c", Write, true},
		{"ExactGrantDoubleStarForm", []string{"lease://a/b/c#read"}, "lease://a/b/c/**", Read, true},
		{"ExactGrantNotWildcard", []string{"lease://a/b/c#read"}, "lease://a/b/*", Read, false},
		{"FleetGrantNeverLease", []string{"fleet://**#*"}, "lease://a/b/c", Read, false},
		{"WriteOnlyNotRead", []string{"lease://**#write"}, "lease://a/b/c", Read, false},
		{"ReadOnlyNotWrite", []string{"lease://**#read"}, "lease://a/b/c", Write, false},
		{"StarAllowsRead", []string{"lease://**#*"}, "lease://a/b/c", Read, true},
		{"StarAllowsWrite", []string{"lease://**#*"}, "lease://a/b/c", Write, true},
		{"StarAllowsBoth", []string{"lease://**#*"}, "lease://a/b/c", ReadWrite, true},
		{"SplitAccessNotAdded", []string{"lease://**#read", "lease://**#write"}, "lease://a/b/c", ReadWrite, false},
		{"NoAccessNeverAllowed", []string{"lease://**#*"}, "lease://a/b/c", 0, false},
		{"NoGrants", nil, "lease://a/b/c", Read, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gs := mustParseGrants(t, tt.grants...)
			if got := gs.AllowsLease(mustParseSelector(t, tt.sel), tt.access); got != tt.want {
				t.Errorf("AllowsLease = %v, want %v", got, tt.want)
			}
		})
	}
}

// AllowsRoute answers as AllowsLease of the route's selector, for every
// grant set and access of the table above and routes inside and outside
// them.
func TestGrants_AllowsRouteIsAllowsLease(t *testing.T) {
	grantSets := [][]string{
		{"lease://*/*/*#read"}, {"lease://**#write"}, {"lease://acme/*/*#*"}, {"lease://acme/*/*#read", "lease://*/renderers/*#write"},
		{"lease://**/a/**#*"}, {"lease://a/b/c#write"}, {"fleet://**#*"}, {"lease://**#read", "lease://**#write"}, nil,
	}
	routes := []string{"lease://acme/renderers/doc-1", "lease://a/b/c", "lease://b/a/c", "lease://c/b/a", "lease://other/renderers/x", "lease://a/b/d"}
	for _, g := range grantSets {
		gs := mustParseGrants(t, g...)
		for _, rs := range routes {
			r, err := ParseRoute(rs)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range []Access{0, Read, Write, ReadWrite} {
				if got, want := gs.AllowsRoute(r, a), gs.AllowsLease(r.Selector(), a); got != want {
					t.Errorf("grants %v, %s, access %v: AllowsRoute %v, AllowsLease %v", g, rs, a, got, want)
				}
			}
		}
	}
}

func TestGrants_AllowsLeaseZeroSelector(t *testing.T) {
	if AllGrants().AllowsLease(Selector{}, Read) {
		t.Error("zero Selector allowed")
	}
}

func TestGrants_AllowsFleet(t *testing.T) {
	for _, tt := range []struct {
		name   string
		grants []string
		root   string
		access Access
		want   bool
	}{
		{"Exact", []string{"fleet://acme#read"}, "acme", Read, true},
		{"ExactNotChild", []string{"fleet://acme#read"}, "acme/inst-7", Read, false},
		{"DoubleStarSelf", []string{"fleet://acme/**#read"}, "acme", Read, true},
		{"DoubleStarDeep", []string{"fleet://acme/**#read"}, "acme/x/y/z", Read, true},
		{"DoubleStarOther", []string{"fleet://acme/**#read"}, "other/x", Read, false},
		{"Star", []string{"fleet://*/mon#write"}, "inst-7/mon", Write, true},
		{"StarOneSegment", []string{"fleet://*/mon#write"}, "a/b/mon", Write, false},
		{"Middle", []string{"fleet://**/mon/**#read"}, "a/mon/b", Read, true},
		{"LeaseGrantNeverFleet", []string{"lease://**#*"}, "acme", Read, false},
		{"WriteOnlyNotRead", []string{"fleet://**#write"}, "acme", Read, false},
		{"StarBoth", []string{"fleet://**#*"}, "acme", ReadWrite, true},
		{"IllegalRoot", []string{"fleet://**#*"}, "Acme", Read, false},
		{"EmptyRoot", []string{"fleet://**#*"}, "", Read, false},
		{"WildRoot", []string{"fleet://**#*"}, "*", Read, false},
		{"TooDeep", []string{"fleet://**#*"}, strings.Repeat("a/", muster.MaxFleetDepth) + "a", Read, false},
		{"MaxDepth", []string{"fleet://**#*"}, strings.Repeat("a/", muster.MaxFleetDepth-1) + "a", Read, true},
		// Legal segments and depth, but longer than a root may be: no
		// grant names what the store refuses.
		{"TooLong", []string{"fleet://**#*"}, strings.Repeat(strings.Repeat("a", muster.MaxSegmentLen)+"/", 2) + "a", Read, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gs := mustParseGrants(t, tt.grants...)
			if got := gs.AllowsFleet(tt.root, tt.access); got != tt.want {
				t.Errorf("AllowsFleet = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAllGrants(t *testing.T) {
	gs := AllGrants()
	for _, g := range gs {
		if _, err := ParseGrant(g.String()); err != nil {
			t.Errorf("AllGrants() has %q: %v", g, err)
		}
	}
	for _, s := range []string{"lease://**", "lease://*/*/*", "lease://a/b/c", "lease://**/x/**"} {
		if !gs.AllowsLease(mustParseSelector(t, s), ReadWrite) {
			t.Errorf("AllGrants() does not allow %s", s)
		}
	}
	if !gs.AllowsFleet("a/b/c", ReadWrite) {
		t.Error("AllGrants() does not allow fleet a/b/c")
	}
}

// randomSelector draws a legal selector over the alphabet {a, b}.
func randomSelector(rng *rand.Rand) Selector {
	choices := []string{"a", "b", "*", "**"}
	for {
		segs := make([]string, 1+rng.IntN(5))
		for i := range segs {
			segs[i] = choices[rng.IntN(len(choices))]
		}
		if sel, err := ParseSelector(LeaseScheme + strings.Join(segs, "/")); err == nil {
			return sel
		}
	}
}

// TestContains_BruteForce checks containment against enumeration of every
// depth-3 route over {a, b} plus the fresh literal z, which witnesses any
// uncovered "*" position (see Selector.Contains).
func TestContains_BruteForce(t *testing.T) {
	alphabet := []string{"a", "b", "z"}
	var routes []Route
	for _, x := range alphabet {
		for _, y := range alphabet {
			for _, z := range alphabet {
				routes = append(routes, Route{x, y, z})
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s, g := randomSelector(rng), randomSelector(rng)
		want := true
		for _, r := range routes {
			m := s.Matches(r)
			if m != refMatch(s.Segments(), r) {
				t.Fatalf("%s.Matches(%s) = %v disagrees with the reference", s, r, m)
			}
			if m && !g.Matches(r) {
				want = false
			}
		}
		gs := Grants{{raw: g.String() + "#read", scheme: schemeLease, access: Read, lease: g}}
		if got := gs.AllowsLease(s, Read); got != want {
			t.Fatalf("grant %s, selector %s: AllowsLease = %v, brute force %v", g, s, got, want)
		}
	}
}

func BenchmarkAllowsLease(b *testing.B) {
	gs := mustParseGrants(b,
		"lease://other/*/*#read", "fleet://**#*", "lease://**/x/**#read", "lease://acme/renderers/*#write",
		"lease://acme/*/*#read")
	for _, s := range []string{"lease://acme/renderers/doc-1", "lease://acme/**", "lease://*/*/*"} {
		sel := mustParseSelector(b, s)
		b.Run(s, func(b *testing.B) {
			for b.Loop() {
				selectorBenchSink = gs.AllowsLease(sel, Read)
			}
		})
	}
}

// FuzzAllowsFleetIsParseFleetRoot: one rule for roots. The widest fleet
// grant allows exactly the roots muster.ParseFleetRoot (the store's check)
// accepts, so a grant never names a root the store refuses, nor the other
// way round.
func FuzzAllowsFleetIsParseFleetRoot(f *testing.F) {
	for _, s := range []string{"monitors", "inst-7/monitors", "", "a//b", "A", "*", "**",
		strings.Repeat("a/", muster.MaxFleetDepth) + "a", strings.Repeat("a", muster.MaxSegmentLen+1),
		strings.Repeat(strings.Repeat("a", muster.MaxSegmentLen)+"/", 2) + "a"} {
		f.Add(s)
	}
	everything := AllGrants()
	f.Fuzz(func(t *testing.T, root string) {
		_, err := muster.ParseFleetRoot(root)
		if allowed := everything.AllowsFleet(root, ReadWrite); allowed != (err == nil) {
			t.Fatalf("AllowsFleet(%q) = %v, ParseFleetRoot = %v", root, allowed, err)
		}
	})
}
