package core

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// inventoryOf builds a broker holding realms×10×100 leases in one family
// (realm-i/area-j/res-k), once per size per test binary.
var (
	invMu     sync.Mutex
	invByTerm = map[int]*Broker{}
)

func inventoryOf(b *testing.B, realms int) *Broker {
	b.Helper()
	invMu.Lock()
	defer invMu.Unlock()
	if br := invByTerm[realms]; br != nil {
		return br
	}
	br := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, SystemClock{}, nil)
	ctx := context.Background()
	call(ctx, br, func(s *State, now time.Time) (struct{}, error) {
		s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL})
		for i := 0; i < realms; i++ {
			for j := 0; j < 10; j++ {
				for k := 0; k < 100; k++ {
					r := Route{Realm: "realm-" + strconv.Itoa(i), Area: "area-" + strconv.Itoa(j), Resource: "res-" + strconv.Itoa(k)}
					if _, _, err := s.Acquire(now, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: MaxLeaseTTL}); err != nil {
						return struct{}{}, err
					}
				}
			}
			s.TakeEvents()
		}
		return struct{}{}, nil
	})
	invByTerm[realms] = br
	return br
}

func closeInventories() {
	invMu.Lock()
	defer invMu.Unlock()
	for k, br := range invByTerm {
		br.Close()
		delete(invByTerm, k)
	}
}

func reportP99(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-µs")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
}

// BenchmarkListExact: the exact-selector LIST path of the handler (one
// actor round trip, keyed lookup) at 1,000,000 held leases.
func BenchmarkListExact(b *testing.B) {
	br := inventoryOf(b, 1000)
	r := Route{Realm: "realm-777", Area: "area-3", Resource: "res-42"}
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	for b.Loop() {
		t := time.Now()
		res, err := br.Lookup(ctx, "acme", r)
		lat = append(lat, time.Since(t))
		if err != nil || res.Item == nil {
			b.Fatal("exact lookup missed")
		}
	}
	reportP99(b, lat)
}

// BenchmarkListArea: `lease://realm-7/area-3/*` (100 matches) — snapshot
// through the actor plus one page — at 1,000,000 and at 10,000 leases.
func BenchmarkListArea(b *testing.B) {
	for _, realms := range []int{10, 1000} {
		b.Run("leases="+strconv.Itoa(realms*1000), func(b *testing.B) {
			br := inventoryOf(b, realms)
			sel, _ := ParseSelector("lease://realm-7/area-3/*")
			ctx := context.Background()
			lat := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				t := time.Now()
				sn, err := br.OpenSnapshot(ctx, "acme", "bench")
				if err != nil {
					b.Fatal(err)
				}
				res := sn.Page(sel, "", Budget{Limit: DefaultPageLimit, Bytes: DefaultPageBytes, Examined: DefaultExaminedBudget})
				lat = append(lat, time.Since(t))
				if len(res.Items) != 100 || !res.Done {
					b.Fatalf("%d items, done %v", len(res.Items), res.Done)
				}
			}
			reportP99(b, lat)
		})
	}
}

// BenchmarkSnapshot: taking a snapshot of 1,000,000 leases, on the
// synchronous core (the O(1) copy) and through the actor.
func BenchmarkSnapshot(b *testing.B) {
	br := inventoryOf(b, 1000)
	b.Run("state", func(b *testing.B) {
		call(context.Background(), br, func(s *State, now time.Time) (struct{}, error) {
			for b.Loop() {
				s.OpenSnapshot(now, "acme", "bench")
			}
			return struct{}{}, nil
		})
	})
	b.Run("actor", func(b *testing.B) {
		for b.Loop() {
			br.OpenSnapshot(context.Background(), "acme", "bench")
		}
	})
}

// BenchmarkPageAll: paging through all 1,000,000 leases with limit 500 on
// one snapshot; reports items/s.
func BenchmarkPageAll(b *testing.B) {
	br := inventoryOf(b, 1000)
	sel, _ := ParseSelector("lease://**")
	items := 0
	for b.Loop() {
		sn, _ := br.OpenSnapshot(context.Background(), "acme", "bench")
		after := ""
		for {
			res := sn.Page(sel, after, Budget{Limit: MaxPageLimit, Bytes: DefaultPageBytes, Examined: DefaultExaminedBudget})
			items += len(res.Items)
			if res.Done {
				break
			}
			after = res.After
		}
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
