package core

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// LiveNames against the brute force (every matching resource, filtered,
// sorted, deduplicated), over random inventories, selectors and windows;
// and paging with it to the end yields each name exactly once.
func TestLiveNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seg := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(n)) }
	for round := range 40 {
		var routes []Route
		seen := map[string]bool{}
		for range rng.IntN(300) {
			r := Route{Realm: seg("r", 2), Area: seg("a", 4), Resource: seg("n-", 60)}
			if !seen[r.Key()] {
				seen[r.Key()] = true
				routes = append(routes, r)
			}
		}
		s := fillState(t, routes)
		sn := s.HeldView(t0, "acme")
		for _, raw := range []string{"lease://r0/a1/*", "lease://r0/*/*", "lease://*/a2/*", "lease://**", "lease://r1/**", "lease://r0/a1/n-7", "lease://*/*/n-3"} {
			sel := mustSel(t, raw)
			var all []string
			for _, r := range routes {
				if sel.Matches(r) {
					all = append(all, r.Resource)
				}
			}
			slices.Sort(all)
			all = slices.Compact(all)
			after, upto := seg("n-", 70), ""
			if rng.IntN(2) == 0 {
				upto = seg("n-", 70)
			}
			limit := 1 + rng.IntN(20)
			var want []string
			for _, n := range all {
				if n > after && (upto == "" || n <= upto) {
					want = append(want, n)
				}
			}
			wantMore := len(want) > limit
			want = want[:min(limit, len(want))]
			got, more := sn.LiveNames(sel, after, upto, limit)
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) || more != wantMore {
				t.Fatalf("round %d %s after %q upto %q limit %d:\n got %v more %v\nwant %v more %v", round, raw, after, upto, limit, got, more, want, wantMore)
			}
			// Paging to the end.
			var paged []string
			for after := ""; ; {
				page, more := sn.LiveNames(sel, after, "", limit)
				paged = append(paged, page...)
				if !more {
					break
				}
				after = page[len(page)-1]
			}
			if !slices.Equal(paged, all) && !(len(paged) == 0 && len(all) == 0) {
				t.Fatalf("round %d %s paged %v, want %v", round, raw, paged, all)
			}
		}
	}
}

// One page of LiveNames over 100,000 held leases keeps memory proportional
// to the page, not to the inventory: the bound of a gap request.
func TestLiveNamesMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 leases")
	}
	routes := make([]Route, 100_000)
	for i := range routes {
		routes[i] = Route{Realm: "acme", Area: "monitors", Resource: fmt.Sprintf("repo-%d", i)}
	}
	s := fillState(t, routes)
	sn := s.HeldView(t0, "acme")
	sel := mustSel(t, "lease://acme/monitors/*")
	perPage := func(limit int) float64 {
		return testing.AllocsPerRun(3, func() { sn.LiveNames(sel, "repo-5", "", limit) })
	}
	bytesPerPage := func(limit int) uint64 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		sn.LiveNames(sel, "repo-5", "", limit)
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	small, large := bytesPerPage(100), bytesPerPage(MaxGapPage)
	t.Logf("one page over 100,000 leases: limit 100: %d bytes (%.0f allocs); limit %d: %d bytes (%.0f allocs)",
		small, perPage(100), MaxGapPage, large, perPage(MaxGapPage))
	if large > 8<<20 {
		t.Errorf("a page of %d names allocated %d bytes", MaxGapPage, large)
	}
	if small > 256<<10 {
		t.Errorf("a page of 100 names allocated %d bytes", small)
	}
}
