package core

import (
	"math/rand/v2"
	"testing"
)

// The expiry heap keeps each entry's expiry beside its lease: after random
// pushes, removals and renewals, every lease knows its index, every entry
// carries its lease's expiry, and the heap property holds.
func TestLeaseHeapInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var h leaseHeap
	var live []*lease
	for step := range 20000 {
		switch k := rng.IntN(10); {
		case k < 4 || len(live) == 0:
			l := &lease{item: &Item{expiresAt: rng.Int64N(1000)}}
			h.push(l)
			live = append(live, l)
		case k < 7:
			i := rng.IntN(len(live))
			h.remove(live[i])
			live = append(live[:i], live[i+1:]...)
		default:
			l := live[rng.IntN(len(live))]
			it := *l.item
			it.expiresAt = rng.Int64N(1000)
			l.item = &it
			h.moved(l)
		}
		if len(h) != len(live) {
			t.Fatalf("step %d: %d entries for %d leases", step, len(h), len(live))
		}
		for i, e := range h {
			if int(e.l.heapIdx) != i || e.at != e.l.item.expiresAt {
				t.Fatalf("step %d: entry %d: index %d, at %d, expiry %d", step, i, e.l.heapIdx, e.at, e.l.item.expiresAt)
			}
			if i > 0 && h[(i-1)/2].at > e.at {
				t.Fatalf("step %d: entry %d expires before its parent", step, i)
			}
		}
	}
}
