package core

import (
	"container/heap"
	"context"
	"math"
	"slices"
	"strings"
	"time"
)

// HeldView clones the family's held set at the current revision, after
// processing due expiry, like OpenSnapshot, but does not register the clone:
// it serves one read that needs no cursor (a fleet gap), so it neither counts
// against the snapshot caps nor evicts a caller's LIST snapshot. The result
// has ID 0 and cannot be resumed.
func (s *State) HeldView(now time.Time, fam Family) *Snapshot {
	s.expireDue(now)
	return &Snapshot{Family: fam, Revision: s.famRevOf(fam), tree: s.cloneHeld(fam)}
}

// HeldView takes an unregistered view of the family's held set; see
// State.HeldView. The clone is O(1) on the actor; reading it happens on the
// caller's goroutine.
func (b *Broker) HeldView(ctx context.Context, fam Family) (*Snapshot, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (*Snapshot, error) {
		return s.HeldView(now, fam), nil
	})
}

// Resources returns the resource segment of every lease of the snapshot
// matching sel, in route order (so not necessarily sorted, and possibly with
// repeats when sel spans several realms or areas). It reads the whole match
// set in one pass, without page budgets: callers bound it by what they
// authorized, as a LIST of the same selector to its end would be.
func (sn *Snapshot) Resources(sel Selector) []string {
	res := sn.Page(sel, "", Budget{Limit: math.MaxInt, Bytes: math.MaxInt, Examined: math.MaxInt})
	out := make([]string, len(res.Items))
	for i, it := range res.Items {
		out[i] = it.Route().Resource
	}
	return out
}

// Gap page limits: one page of a fleet gap covers at most MaxGapPage names
// of each side.
const (
	DefaultGapPage = 10_000
	MaxGapPage     = 10_000
)

// LiveNames returns, in byte order and without repeats, the smallest limit
// resource segments of the snapshot's leases matching sel that sort
// strictly after after and, unless upto is "", not after upto; more
// reports whether further such names exist. It holds at most limit+1 names
// at a time, whatever the snapshot's size, and costs one seek per
// (realm, area) group under the selector's prefix plus the leases read.
func (sn *Snapshot) LiveNames(sel Selector, after, upto string, limit int) (names []string, more bool) {
	forms := sel.forms
	// While names arrive in ascending order (one group, the usual case) they
	// are appended; the first one out of order turns kept into a max-heap
	// of the smallest names, with a set against repeats across groups.
	var kept maxHeap
	var seen map[string]struct{}
	add := func(res string) bool { // false: nothing larger can be kept
		if res <= after || (upto != "" && res > upto) {
			return true
		}
		if seen == nil {
			if len(kept) == 0 || res > kept[len(kept)-1] {
				if len(kept) == limit {
					more = true
					return false
				}
				kept = append(kept, res)
				return true
			}
			seen = make(map[string]struct{}, len(kept))
			for _, n := range kept {
				seen[n] = struct{}{}
			}
			heap.Init(&kept)
		}
		if _, dup := seen[res]; dup {
			return true
		}
		if len(kept) == limit {
			more = true
			if res > kept[0] {
				return false
			}
			delete(seen, heap.Pop(&kept).(string))
		}
		heap.Push(&kept, res)
		seen[res] = struct{}{}
		return true
	}
	prefix := sel.Prefix()
	iter := sn.tree.Iter()
	defer iter.Release()
	ok := iter.Seek(&Item{key: prefix})
	for ok {
		key := iter.Item().key
		if !strings.HasPrefix(key, prefix) {
			break
		}
		r := routeFromKey(key)
		group := r.Realm + "/" + r.Area + "/"
		wild := false
		for _, f := range forms {
			if (f[0] != "*" && f[0] != r.Realm) || (f[1] != "*" && f[1] != r.Area) {
				continue
			}
			if f[2] == "*" {
				wild = true
			} else if _, found := sn.tree.Get(&Item{key: group + f[2]}); found {
				add(f[2])
			}
		}
		if wild {
			for ok = iter.Seek(&Item{key: group + after}); ok; ok = iter.Next() {
				k := iter.Item().key
				if !strings.HasPrefix(k, group) || !add(k[len(group):]) {
					break
				}
				if upto != "" && k[len(group):] > upto {
					break
				}
			}
		}
		// The next group: every key between group and group[:-1]+"0" has
		// the prefix group ("/"+1 is "0").
		ok = iter.Seek(&Item{key: group[:len(group)-1] + "0"})
	}
	names = []string(kept)
	if seen != nil {
		slices.Sort(names)
	}
	return names, more
}

// maxHeap keeps the smallest names seen: its root is the largest kept.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Retain registers a view taken by HeldView as a snapshot that later pages
// can resume (see OpenSnapshot for the caps it is subject to), when a read
// that began on an unregistered view turns out to need more pages.
func (s *State) Retain(now time.Time, view *Snapshot, caller string) *Snapshot {
	return s.openSnapshot(now, view.Family, caller, view.Revision, view.tree)
}

// Retain registers view; see State.Retain.
func (b *Broker) Retain(ctx context.Context, view *Snapshot, caller string) (*Snapshot, error) {
	return callFam(ctx, b, view.Family, func(s *State, now time.Time) (*Snapshot, error) {
		return s.Retain(now, view, caller), nil
	})
}
