package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The held index is applied lazily (family.go): every snapshot must still
// be the held set at its revision, Item for Item, and stay so while the
// family goes on changing. Random histories of grants, renewals, releases,
// batches, expiries, session ends and waiters, past maxStale changes, are
// checked against the leases themselves at every snapshot.
func TestSnapshotsSeeEveryChange(t *testing.T) {
	trimmed := 0 // histories whose tree changed between two reads (trimStale)
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if checkSnapshotsSeeEveryChange(t, seed) {
				trimmed++
			}
		})
	}
	if trimmed == 0 {
		t.Fatal("no history filled the list of changes to its bound")
	}
}

func checkSnapshotsSeeEveryChange(t *testing.T, seed uint64) (trimmed bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	// Every other history reads rarely and holds long, so the list fills
	// and is trimmed into the tree between reads.
	rare := seed%2 == 0
	long := time.Duration(0)
	if rare {
		long = 5 * time.Minute
	}
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	now := t0
	next := byte(1)
	live := []byte{}
	open := func() {
		if _, err := s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(next), OwnerID: "w", TTL: long + time.Duration(2+rng.IntN(4))*time.Second}); err != nil {
			t.Fatal(err)
		}
		live = append(live, next)
		next++
	}
	for range 4 {
		open()
	}
	ttl := func() time.Duration { return long + time.Duration(100+rng.IntN(3000))*time.Millisecond }
	routes := make([]Route, 2*maxStale)
	for i := range routes {
		routes[i] = Route{"acme", fmt.Sprint("a", i%7), fmt.Sprint("r", i)}
	}
	token := map[Route]FencingToken{}
	type kept struct {
		sn   *Snapshot
		want []*Item
	}
	var snaps []kept
	applied := false // the tree changed between two reads
	treeLen := 0     // the tree's size at the last read
	for step := range 20000 {
		now = now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		who := sid(live[rng.IntN(len(live))])
		r := routes[rng.IntN(len(routes))]
		switch k := rng.IntN(100); {
		case k < 45:
			h, _, err := s.Acquire(now, AcquireRequest{Family: "acme", Session: who, Route: r, TTL: ttl(), Wait: time.Duration(rng.IntN(2)) * time.Second})
			if err == nil && h.Token != 0 {
				token[r] = h.Token
			}
		case k < 60:
			s.Extend(now, ExtendRequest{Family: "acme", Session: who, Route: r, Token: token[r], TTL: ttl()})
		case k < 85:
			s.Release(now, ReleaseRequest{Family: "acme", Session: who, Route: r, Token: token[r]})
		case k < 93:
			ops := make([]BatchOp, 1+rng.IntN(64))
			for i := range ops {
				r := routes[rng.IntN(len(routes))]
				ops[i] = BatchOp{Kind: BatchKind(1 + rng.IntN(3)), Route: r, TTL: ttl(), Token: token[r]}
			}
			if ans, err := s.Batch(now, BatchRequest{Family: "acme", Session: who, Ops: ops}); err == nil {
				for i, res := range ans.Results {
					if res.Holding.Token != 0 {
						token[ops[i].Route] = res.Holding.Token
					}
				}
			}
		case k < 95 && (!rare || rng.IntN(20) == 0):
			s.EndSession(now, "acme", who)
			open()
		case k < 97 && (!rare || rng.IntN(10) == 0):
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			s.Tick(now)
		case rare && rng.IntN(60) != 0:
		default:
			sn := s.OpenSnapshot(now, "acme", "t")
			snaps = append(snaps, kept{sn, heldItems(s, "acme")})
			treeLen = sn.tree.Len()
		}
		if f := s.families["acme"]; f != nil && f.held.Len() != treeLen {
			applied = true
		}
		for _, r := range s.TakeResults() {
			if r.Err == nil {
				token[r.Grant.Item.Route()] = r.Grant.Token
			}
		}
		s.TakeEvents()
		live = slices.DeleteFunc(live, func(b byte) bool { _, ok := s.sessions[sid(b)]; return !ok })
		for len(live) < 4 {
			open()
		}
		if step%1000 == 999 {
			for i, k := range snaps {
				if got := snapshotItems(k.sn); !slices.Equal(got, k.want) {
					t.Fatalf("step %d: snapshot %d has %d items, want %d (held then)", step, i, len(got), len(k.want))
				}
			}
		}
	}
	if st := s.stats; len(snaps) < 4 || st.Releases == 0 || st.Renewals == 0 || st.AcquireGrantedAfterWait == 0 || !rare && st.Expiries == 0 {
		t.Fatalf("a thin history: %d snapshots, %+v", len(snaps), st)
	}
	return applied
}

// heldItems is the current Item of every lease of fam, by key.
func heldItems(s *State, fam Family) []*Item {
	var out []*Item
	if s.families[fam] == nil {
		return nil
	}
	for _, l := range s.families[fam].leases {
		out = append(out, l.item)
	}
	slices.SortFunc(out, func(a, b *Item) int {
		if a.key < b.key {
			return -1
		}
		return 1
	})
	return out
}

func snapshotItems(sn *Snapshot) []*Item {
	var out []*Item
	sn.tree.Scan(func(it *Item) bool { out = append(out, it); return true })
	return out
}
