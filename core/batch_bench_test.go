package core

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkStateBatch: one batch of 64 acquires of free routes, then one
// batch of 64 releases of them, on the synchronous core (the core's share
// of tests/peers' muster-batch64 row). ns/op is per batch pair; ns/lease-op
// per operation.
//   - no-snapshot: nothing reads the family's inventory;
//   - open-snapshot: one snapshot of the family stays open;
//   - snapshot-every-batch: a snapshot is taken after every batch, so the
//     held index is brought up to date each time (the lazy index's worst
//     case: every change reaches the tree).
func BenchmarkStateBatch(b *testing.B) {
	for _, mode := range []string{"no-snapshot", "open-snapshot", "snapshot-every-batch"} {
		b.Run(mode, func(b *testing.B) { benchStateBatch(b, mode) })
	}
}

func benchStateBatch(b *testing.B, mode string) {
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL})
	// Other leases of the family, held by another session, so the tree has
	// some depth, as it has under load.
	s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(2), OwnerID: "v", TTL: MaxSessionTTL})
	for i := 0; i < 2048; i++ {
		r := Route{Realm: "load", Area: "other", Resource: "r" + strconv.Itoa(i)}
		if _, _, err := s.Acquire(t0, AcquireRequest{Family: "acme", Session: sid(2), Route: r, TTL: MaxLeaseTTL}); err != nil {
			b.Fatal(err)
		}
	}
	if mode == "open-snapshot" {
		s.OpenSnapshot(t0, "acme", "reader")
	}
	every := mode == "snapshot-every-batch"
	s.TakeEvents()
	acq := make([]BatchOp, 64)
	rel := make([]BatchOp, 64)
	for i := range acq {
		r := Route{Realm: "load", Area: "w", Resource: "r" + strconv.Itoa(i)}
		acq[i] = BatchOp{Kind: BatchAcquire, Route: r, TTL: time.Minute}
		rel[i] = BatchOp{Kind: BatchRelease, Route: r}
	}
	b.ReportAllocs()
	for b.Loop() {
		a, err := s.Batch(t0, BatchRequest{Family: "acme", Session: sid(1), Ops: acq})
		if err != nil || a.Results[63].Err != nil {
			b.Fatal(err, a.Results[63].Err)
		}
		for i := range rel {
			rel[i].Token = a.Results[i].Holding.Token
		}
		s.TakeEvents()
		if every {
			s.OpenSnapshot(t0, "acme", "reader")
		}
		r, err := s.Batch(t0, BatchRequest{Family: "acme", Session: sid(1), Ops: rel})
		if err != nil || r.Results[63].Err != nil {
			b.Fatal(err, r.Results[63].Err)
		}
		s.TakeEvents()
		if every {
			s.OpenSnapshot(t0, "acme", "reader")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*128), "ns/lease-op")
}
