package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

// fillState holds one lease per route on session 1.
func fillState(t testing.TB, routes []Route) *State {
	t.Helper()
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	if _, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL}); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if _, _, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.TakeEvents()
	}
	return s
}

// pageAll pages a snapshot to the end and returns the keys in order.
func pageAll(t testing.TB, sn *Snapshot, sel Selector, b Budget) ([]string, int) {
	t.Helper()
	var keys []string
	after, pages := "", 0
	for {
		pages++
		res := sn.Page(sel, after, b)
		for _, it := range res.Items {
			keys = append(keys, it.Key())
		}
		if res.Done {
			return keys, pages
		}
		if res.After <= after {
			t.Fatalf("paging did not advance: %q after %q", res.After, after)
		}
		after = res.After
		if pages > 100000 {
			t.Fatal("paging does not end")
		}
	}
}

// The union of pages equals a brute-force filter of the snapshot, in key
// order, without duplicates, for random selectors, inventories and budgets.
func TestPagingMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "c", "a-b", "b0", "ab"}
	pick := func() string { return alphabet[rng.IntN(len(alphabet))] }
	var routes []Route
	seen := map[Route]bool{}
	for len(routes) < 150 {
		r := Route{pick(), pick(), pick()}
		if !seen[r] {
			seen[r] = true
			routes = append(routes, r)
		}
	}
	s := fillState(t, routes)
	sn := s.OpenSnapshot(t0, "acme", "c")
	var all []string
	for _, r := range routes {
		all = append(all, r.Key())
	}
	slices.Sort(all)
	segOrWild := func() string {
		switch rng.IntN(4) {
		case 0:
			return "*"
		default:
			return pick()
		}
	}
	for i := 0; i < 400; i++ {
		var raw string
		if rng.IntN(5) == 0 {
			raw = "lease://" + pick() + "/**"
		} else {
			raw = fmt.Sprintf("lease://%s/%s/%s", segOrWild(), segOrWild(), segOrWild())
		}
		sel, err := ParseSelector(raw)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range all {
			if sel.MatchesKey(k) {
				want = append(want, k)
			}
		}
		b := Budget{Limit: 1 + rng.IntN(4), Bytes: DefaultPageBytes, Examined: 2 + rng.IntN(20)}
		got, _ := pageAll(t, sn, sel, b)
		if !slices.Equal(got, want) {
			t.Fatalf("%s with %+v:\n got  %v\n want %v", raw, b, got, want)
		}
	}
}

// A snapshot does not see later changes: acquire, release, renewal, expiry.
func TestSnapshotIsolation(t *testing.T) {
	routes := []Route{{"acme", "r", "1"}, {"acme", "r", "2"}, {"acme", "r", "3"}}
	s := fillState(t, routes)
	sn := s.OpenSnapshot(t0, "acme", "c")
	sel, _ := ParseSelector("lease://acme/r/*")
	before := sn.Page(sel, "", Budget{Limit: 10, Bytes: DefaultPageBytes, Examined: 100})

	// fillState granted routes 1..3 at revisions (tokens) 1..3.
	if err := s.Release(t0, ReleaseRequest{Family: "acme", Session: sid(1), Route: routes[1], Token: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Extend(t0.Add(time.Second), ExtendRequest{Family: "acme", Session: sid(1), Route: routes[2], Token: 3, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(1), Route: Route{"acme", "r", "4"}, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.Tick(t0.Add(2 * time.Minute)) // everything else expires

	after := sn.Page(sel, "", Budget{Limit: 10, Bytes: DefaultPageBytes, Examined: 100})
	if len(after.Items) != 3 || len(before.Items) != 3 {
		t.Fatalf("snapshot changed: before %d items, after %d", len(before.Items), len(after.Items))
	}
	for i := range after.Items {
		if after.Items[i] != before.Items[i] || after.Items[i].Renewals() != 0 {
			t.Fatalf("item %d changed under the snapshot", i)
		}
	}
	if s.Stats().Leases != 0 {
		t.Fatalf("live state did change: %d leases", s.Stats().Leases)
	}
}

func TestSnapshotRetention(t *testing.T) {
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k"), MaxSnapshots: 3, MaxCallerSnapshots: 2, SnapshotIdle: time.Minute})
	a1 := s.OpenSnapshot(t0, "acme", "alice")
	a2 := s.OpenSnapshot(t0, "acme", "alice")
	a3 := s.OpenSnapshot(t0, "acme", "alice") // evicts a1: per-caller cap
	if _, err := s.ResumeSnapshot(t0, "acme", a1.ID); muster.ErrorCode(err) != muster.CodeCursorExpired {
		t.Fatalf("a1 after per-caller eviction: %v", err)
	}
	s.ResumeSnapshot(t0, "acme", a2.ID) // a2 is now the most recent of alice
	b1 := s.OpenSnapshot(t0, "acme", "bob")
	s.OpenSnapshot(t0, "acme", "bob") // broker cap 3: evicts the LRU (a3)
	if _, err := s.ResumeSnapshot(t0, "acme", a3.ID); muster.ErrorCode(err) != muster.CodeCursorExpired {
		t.Fatalf("a3 after broker-cap eviction: %v", err)
	}
	if _, err := s.ResumeSnapshot(t0, "beta", a2.ID); muster.ErrorCode(err) != muster.CodeCursorExpired {
		t.Fatalf("another family resumed a snapshot: %v", err)
	}
	// Idle timeout: b1 used at t0, not touched for more than a minute.
	if _, err := s.ResumeSnapshot(t0.Add(time.Minute+time.Millisecond), "acme", b1.ID); muster.ErrorCode(err) != muster.CodeCursorExpired {
		t.Fatalf("b1 after idle timeout: %v", err)
	}
	st := s.Stats()
	if st.SnapshotsEvicted != 2 || st.SnapshotsExpired == 0 || st.Snapshots != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestLookupExact(t *testing.T) {
	s := fillState(t, []Route{{"acme", "r", "1"}})
	if res := s.Lookup(t0, "acme", Route{"acme", "r", "1"}); res.Item == nil || res.Item.OwnerID() != "w" || res.Revision != s.Revision() {
		t.Fatal("exact lookup missed a held lease")
	}
	if s.Lookup(t0, "acme", Route{"acme", "r", "2"}).Item != nil || s.Lookup(t0, "beta", Route{"acme", "r", "1"}).Item != nil {
		t.Fatal("exact lookup invented a lease")
	}
	if s.Lookup(t0.Add(time.Minute+time.Nanosecond), "acme", Route{"acme", "r", "1"}).Item != nil {
		t.Fatal("exact lookup returned an expired lease")
	}
}
