package peers

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/load"
)

// clients is the number of keep-alive clients of every system.
const clients = 32

// batchSize is the number of keys of one batch (pipelined) pair.
const batchSize = 64

func testingProcs() int { return runtime.GOMAXPROCS(0) }

// A system is one row of the pair table: a name, how to reach it (opened
// anew in each round: fresh sessions, clients and connections), and
// whether its pairs go one key at a time or batchSize keys per round trip.
type system struct {
	name  string
	open  func(testing.TB) leaser      // one key per round trip
	batch func(testing.TB) batchLeaser // or batchSize keys per round trip
	half  bool                         // also paced at half its peak (open loop)
	// server is the process whose CPU time the row reports (markCPU).
	server string
	// broker, when set, is the base URL whose latency histogram gives the
	// broker's own acquire p99 at half peak, beside the client's.
	broker func(testing.TB) string
}

// systems are the rows, in the order they run in each round.
var systems = []system{
	{name: "ceiling", server: "ceiling", open: func(tb testing.TB) leaser { return openHTTP(tb, ceilingURL(tb)) }},
	{name: "muster", server: "muster", open: func(tb testing.TB) leaser { return openHTTP(tb, musterURL(tb)) }, half: true, broker: musterURL},
	{name: "etcd", server: "etcd", open: func(tb testing.TB) leaser { return openEtcd(tb) }, half: true},
	{name: "redis", server: "redis", open: func(tb testing.TB) leaser { return openRedis(tb) }, half: true},
	{name: "redis-pipe64", server: "redis", batch: func(tb testing.TB) batchLeaser { return openRedis(tb) }},
	// Muster's batch endpoint (issue 19): skipped on a broker without it.
	{name: "muster-batch64", server: "muster", batch: openMusterBatch},
}

// rounds is how many times each row runs, rows interleaved (env
// MUSTER_PEERS_ROUNDS, default 3).
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PEERS_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

var (
	openMu  sync.Mutex
	opened  = map[string]openedAt{} // system name → its leaser or batchLeaser
	peakNow = map[string]float64{}  // system name → ops/s of its last peak run
)

type openedAt struct {
	round int
	l     any
}

// openSystem returns the leaser of s for round r, opening it on first use
// in the round and closing the one of the previous round.
func openSystem(tb testing.TB, s system, r int) any {
	tb.Helper()
	openMu.Lock()
	defer openMu.Unlock()
	o, ok := opened[s.name]
	if ok && o.round == r {
		return o.l
	}
	if c, isCloser := o.l.(interface{ close() }); ok && isCloser {
		c.close()
	}
	var l any
	if s.batch != nil {
		l = s.batch(tb)
	} else {
		l = s.open(tb)
	}
	opened[s.name] = openedAt{r, l}
	return l
}

// pairOp returns one pair of worker w for system s: take free keys, give
// them back; it returns the latency of the take. Worker w's keys cycle
// through 1,024 names of its own, so every take finds its key free.
func pairOp(tb testing.TB, s system, r int) func(w int) (time.Duration, error) {
	l := openSystem(tb, s, r)
	n := make([]int, workers())
	// The row decides, not the leaser's type: a Redis leaser is both a
	// leaser and a batchLeaser, and its one-key row must not run batches.
	if s.batch != nil {
		bl := l.(batchLeaser)
		keys := make([][]string, workers())
		return func(w int) (time.Duration, error) {
			n[w]++
			if keys[w] == nil {
				keys[w] = make([]string, batchSize)
			}
			for i := range keys[w] {
				keys[w][i] = "w" + itoa(w) + "/b" + itoa((n[w]*batchSize+i)%1024)
			}
			t := time.Now()
			tokens, err := bl.acquireAll(w, keys[w])
			if err != nil {
				return 0, err
			}
			took := time.Since(t)
			return took, bl.releaseAll(w, keys[w], tokens)
		}
	}
	one := l.(leaser)
	return func(w int) (time.Duration, error) {
		n[w]++
		key := "w" + itoa(w) + "/r" + itoa(n[w]%1024)
		t := time.Now()
		token, err := one.acquire(w, key)
		if err != nil {
			return 0, err
		}
		took := time.Since(t)
		return took, one.release(w, key, token)
	}
}

// BenchmarkPairs runs the pair workload (take an exclusive TTL lease on a
// free key, then give it back) against every system, 32 keep-alive
// clients, with the driver of tests/load: closed loop (load.Parallel) for
// the peak, then for the lease systems open loop (load.Paced) at half of
// the peak just measured. Rows are interleaved in each round, so every
// round compares the systems under the same background load.
//
// Each row reports pairs/s, lease ops/s (a pair is two: the take and the
// give-back, of batchSize keys for batch rows) and the take's latency:
// acq-p50-µs and acq-p99-µs (the req/s, p50-µs and p99-µs of the driver
// are those of whole pairs, or of whole batch pairs), and the server's own
// CPU per lease operation, server-cpu-µs/op (cpu_test.go).
func BenchmarkPairs(b *testing.B) {
	for r := 1; r <= rounds(); r++ {
		for _, s := range systems {
			b.Run(fmt.Sprintf("round%d/%s", r, s.name), func(b *testing.B) { peak(b, s, r) })
		}
		for _, s := range systems {
			if s.half {
				b.Run(fmt.Sprintf("round%d/%s-half", r, s.name), func(b *testing.B) { half(b, s, r) })
			}
		}
	}
}

func perOp(s system) int {
	if s.batch != nil {
		return batchSize
	}
	return 1
}

func peak(b *testing.B, s system, r int) {
	op := pairOp(b, s, r)
	acq := make([][]time.Duration, workers())
	cpu := markCPU(b, s.server)
	start := time.Now()
	load.Parallel(b, clients, func(w int) error {
		took, err := op(w)
		acq[w] = append(acq[w], took)
		return err
	})
	elapsed := time.Since(start)
	cpu.report(b, 2*b.N*perOp(s)) // per lease operation: a pair is a take and a give-back
	openMu.Lock()
	peakNow[s.name] = float64(b.N) / elapsed.Seconds()
	openMu.Unlock()
	pairs := float64(b.N*perOp(s)) / elapsed.Seconds()
	b.ReportMetric(pairs, "pairs/s")
	b.ReportMetric(2*pairs, "ops/s")
	all := slices.Concat(acq...)
	slices.Sort(all)
	b.ReportMetric(float64(load.Percentile(all, 0.50).Microseconds()), "acq-p50-µs")
	b.ReportMetric(float64(load.Percentile(all, 0.99).Microseconds()), "acq-p99-µs")
}

// half paces the pairs at half of the system's last peak (open loop): the
// latency of a take against a schedule, not against the previous answer.
func half(b *testing.B, s system, r int) {
	openMu.Lock()
	rate := peakNow[s.name] / 2
	openMu.Unlock()
	if rate == 0 {
		b.Skip("needs the peak row of the same system first")
	}
	op := pairOp(b, s, r)
	var before map[float64]float64
	if s.broker != nil {
		before = load.ServerBuckets(b, s.broker(b), acquireRoute)
	}
	cpu := markCPU(b, s.server)
	load.Paced(b, clients, rate, op)
	cpu.report(b, 2*b.N*perOp(s))
	b.ReportMetric(float64(perOp(s))*rate, "paced-pairs/s")
	if s.broker != nil {
		after := load.ServerBuckets(b, s.broker(b), acquireRoute)
		b.ReportMetric(load.ServerQuantile(before, after, 0.99), "broker-acq-p99-le-µs")
	}
}
