// Package load drives a broker over real loopback sockets with many
// keep-alive clients and measures throughput and latency. Its benchmarks
// compare configurations within one run, because the machines are shared
// and noisy: ratios in one run are meaningful, absolute figures less so.
package load

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Client returns an HTTP client whose transport keeps up to n idle
// connections to one host, so n concurrent callers reuse their sockets.
func Client(n int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        n,
			MaxIdleConnsPerHost: n,
			MaxConnsPerHost:     n,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// Parallel runs op b.N times spread over `clients` goroutines (the count is
// rounded to a multiple of GOMAXPROCS by RunParallel) and reports req/s and
// latency percentiles. op gets the index of its goroutine.
func Parallel(b *testing.B, clients int, op func(worker int) error) {
	b.Helper()
	procs := max(1, testingProcs())
	b.SetParallelism(max(1, clients/procs))
	var (
		mu      sync.Mutex
		all     []time.Duration
		workers atomic.Int64
		failed  atomic.Value
	)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		w := int(workers.Add(1) - 1)
		lat := make([]time.Duration, 0, 1024)
		for pb.Next() {
			t := time.Now()
			if err := op(w); err != nil {
				failed.Store(err)
				return
			}
			lat = append(lat, time.Since(t))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	Report(b, all, elapsed)
}

// Report adds req/s, p50 and p99 (µs) to a benchmark's output.
func Report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	if len(lat) == 0 || elapsed <= 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(Percentile(lat, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(Percentile(lat, 0.99).Microseconds()), "p99-µs")
}

// Percentile of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}

// Paced issues b.N operations at a fixed total rate (open loop) from
// `clients` goroutines: operation i is due at start + i/rate, so latency is
// measured against a schedule, not against the previous answer. It reports
// the achieved rate and latency percentiles of each op and of the part of
// it named by the first return value of op (e.g. the acquire of a pair).
func Paced(b *testing.B, clients int, rate float64, op func(worker int) (first time.Duration, err error)) {
	b.Helper()
	interval := time.Duration(float64(time.Second) / rate)
	var (
		mu          sync.Mutex
		whole, part []time.Duration
		failed      atomic.Value
		wg          sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var lw, lp []time.Duration
			for i := w; i < b.N; i += clients {
				due := start.Add(time.Duration(i) * interval)
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				t := time.Now()
				first, err := op(w)
				if err != nil {
					failed.Store(err)
					return
				}
				lw = append(lw, time.Since(t))
				lp = append(lp, first)
			}
			mu.Lock()
			whole = append(whole, lw...)
			part = append(part, lp...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	Report(b, whole, elapsed)
	slices.Sort(part)
	b.ReportMetric(float64(Percentile(part, 0.50).Microseconds()), "first-p50-µs")
	b.ReportMetric(float64(Percentile(part, 0.99).Microseconds()), "first-p99-µs")
}
