package fleetstore

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"
)

// Targets (issue 6): sweep of 10,000 specs ≤ 1 s; plan of 10,000 desired
// against 10,000 live ≤ 100 ms. Register rates are reported as register/s.

const benchSpecs = 10_000

// benchSpec is a small realistic spec; every fifth fails topicSchema.
func benchSpec(i int) []byte {
	if i%5 == 0 {
		return fmt.Appendf(nil, `{"topic":%d,"schedule":"@hourly"}`, i)
	}
	return fmt.Appendf(nil, `{"topic":"org/repo-%d","schedule":"@hourly"}`, i)
}

func BenchmarkRegister(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			f := New(be.new(b).open())
			spec := benchSpec(1)
			for b.Loop() {
				if _, err := f.Register(ctx, fam, root, "repo", spec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "register/s")
		})
	}
}

// BenchmarkRegisterParallel is Register from 8×GOMAXPROCS goroutines on one
// root, the contended case: every call takes the root's counter.
func BenchmarkRegisterParallel(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			f := New(be.new(b).open())
			spec := benchSpec(1)
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := f.Register(ctx, fam, root, "repo", spec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "register/s")
		})
	}
}

// BenchmarkSweep sweeps 10,000 specs. keep-all judges them all and deletes
// nothing; drop-fifth starts every iteration from 10,000 specs of which 2,000
// fail and are deleted.
func BenchmarkSweep(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name+"/keep-all", func(b *testing.B) {
			s := be.new(b).open()
			bulkRegister(b, s, root, benchSpecs, func(i int) []byte { return benchSpec(1) })
			f := New(s)
			for b.Loop() {
				res, err := f.Sweep(ctx, fam, root, []byte(topicSchema))
				if err != nil || len(res.Kept) != benchSpecs {
					b.Fatalf("sweep: %v, kept %d", err, len(res.Kept))
				}
			}
		})
		b.Run(be.name+"/drop-fifth", func(b *testing.B) {
			s := be.new(b).open()
			f := New(s)
			i := 0
			for b.Loop() {
				b.StopTimer()
				r := fmt.Sprintf("sweep/r%d", i)
				i++
				bulkRegister(b, s, r, benchSpecs, benchSpec)
				b.StartTimer()
				res, err := f.Sweep(ctx, fam, r, []byte(topicSchema))
				if err != nil || len(res.Dropped) != benchSpecs/5 {
					b.Fatalf("sweep: %v, dropped %d", err, len(res.Dropped))
				}
			}
		})
	}
}

// BenchmarkDesired lists 10,000 specs in pages of MaxPageSize.
func BenchmarkDesired(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.new(b).open()
			bulkRegister(b, s, root, benchSpecs, benchSpec)
			f := New(s)
			for b.Loop() {
				if got := len(listAll(b, f, fam, root, MaxPageSize)); got != benchSpecs {
					b.Fatalf("listed %d", got)
				}
			}
		})
	}
}

// BenchmarkPlan is the gap of 10,000 desired names against 10,000 live ones,
// half of them shared.
func BenchmarkPlan(b *testing.B) {
	desired, live := planInput(benchSpecs)
	for b.Loop() {
		missing, orphans := Plan(desired, live)
		if len(missing) != benchSpecs/2 || len(orphans) != benchSpecs/2 {
			b.Fatalf("missing %d, orphans %d", len(missing), len(orphans))
		}
	}
}

// bulkRegister registers n specs under root through the backend's own
// minting code, in one transaction, so that setting up 10,000 rows does not
// cost 10,000 fsyncs.
func bulkRegister(tb testing.TB, s Store, root string, n int, spec func(int) []byte) {
	tb.Helper()
	switch s := s.(type) {
	case *boltStore:
		must(tb, s.db.Update(func(tx *bolt.Tx) error {
			for i := range n {
				if _, err := boltMint(tx, fam, root, "repo", spec(i), 0); err != nil {
					return err
				}
			}
			return nil
		}))
	case *pgStore:
		must(tb, s.pool.with(ctx, func(c *pgx.Conn) error {
			return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				batch := &pgx.Batch{}
				for i := range n {
					batch.Queue(pgRegister, fam, root, "repo", spec(i))
				}
				return tx.SendBatch(ctx, batch).Close()
			})
		}))
	default:
		tb.Fatalf("no bulk loader for %T", s)
	}
}
