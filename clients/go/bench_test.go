package muster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The cost of a full relist through the SDK against the real broker: the
// evidence behind the reconciliation default (README.md). Run with
//
//	go test -run '^$' -bench . -benchtime 20x
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		br := mustStartBroker(b)
		c := newClient(b, br.url(), "a")
		s := mustSession(b, c, "bench", time.Minute)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					if _, err := s.Acquire(context.Background(), fmt.Sprintf("lease://acme/renderers/doc-%06d", i), 10*time.Minute); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.Run(fmt.Sprintf("List/items=%d/limit=500", n), func(b *testing.B) {
			for b.Loop() {
				got := 0
				for _, err := range c.List(context.Background(), "lease://acme/renderers/*", ListOptions{Limit: 500}) {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != n {
					b.Fatalf("%d items, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
			b.ReportMetric(float64((n+499)/500), "requests/relist")
		})
		b.Run(fmt.Sprintf("ObserverBootstrap/items=%d", n), func(b *testing.B) {
			for b.Loop() {
				o, err := c.Observe(context.Background(), "lease://acme/renderers/*")
				if err != nil {
					b.Fatal(err)
				}
				if err := o.WaitReady(context.Background()); err != nil {
					b.Fatal(err)
				}
				if got := len(o.View().Items); got != n {
					b.Fatalf("%d items, want %d", got, n)
				}
				o.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}
