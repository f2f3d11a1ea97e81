package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkPairs/round1/ceiling-2   100   1000 ns/op   2000 ops/s   1000 pairs/s   1200 acq-p50-µs   4200 acq-p99-µs   20.5 server-cpu-µs/op
BenchmarkPairs/round1/muster-2    100   2000 ns/op   1000 ops/s    500 pairs/s   2500 acq-p50-µs   9000 acq-p99-µs   30 server-cpu-µs/op
BenchmarkPairs/round1/redis-2     100   1000 ns/op   4000 ops/s   2000 pairs/s    450 acq-p50-µs   4500 acq-p99-µs
BenchmarkPairs/round2/ceiling-2   100   1000 ns/op   2000 ops/s   2000 pairs/s   1200 acq-p50-µs   4200 acq-p99-µs
BenchmarkPairs/round2/muster-2    100   2000 ns/op   1000 ops/s   1500 pairs/s   2500 acq-p50-µs  12000 acq-p99-µs   40 server-cpu-µs/op
BenchmarkPairs/round2/redis-2     100   1000 ns/op   4000 ops/s   3000 pairs/s    450 acq-p50-µs   4500 acq-p99-µs
BenchmarkPairs/round1/muster-half-2  50  3000 ns/op   380 first-p50-µs   900 first-p99-µs   500 broker-acq-p99-le-µs
BenchmarkWatch1000/round1/muster-sse-2   20   5 ns/op   13700 delivery-p50-µs   25900 delivery-p99-µs   1000 watchers
ok  	github.com/musterhq/muster/tests/peers	3.0s
`

func TestTable(t *testing.T) {
	runs, err := parse(strings.NewReader(sample))
	if err != nil || len(runs) != 8 {
		t.Fatalf("parse: %d runs, %v", len(runs), err)
	}
	var b strings.Builder
	write(&b, runs)
	got := b.String()
	for _, want := range []string{
		"2 round(s)",
		// ratios are taken round by round: 500/1000 and 1500/2000 of the
		// ceiling, 500/2000 and 1500/3000 of Redis.
		"| muster | 0.5–1.5 k | 1.0 k | 0.50–0.75 | 0.25–0.50 | 30.00–40.00 | 2.5 ms / 9.0–12 ms | 0.38 ms / 0.90 ms (broker's own p99 ≤ 0.50 ms) |",
		"| ceiling | 1.0–2.0 k |",
		"| muster-sse | 1000 | 14 ms | 26 ms | — |",
		// round by round: 500/1000 and 1500/2000; the CPU of each round.
		"| muster pairs/s ÷ ceiling | 0.50 | 0.75 |",
		"| muster: server CPU µs per lease op | 30.00 | 40.00 |",
		"| ceiling: server CPU µs per lease op | 20.50 | — |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| muster-half |") {
		t.Errorf("a half row is a column of its system, not a row:\n%s", got)
	}
}

func TestTableRefusesAFailedRun(t *testing.T) {
	if _, err := parse(strings.NewReader(sample + "--- FAIL: BenchmarkPairs/round1/etcd\n")); err == nil {
		t.Fatal("a failed run must not make a table")
	}
}
