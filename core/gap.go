package core

import (
	"context"
	"math"
	"time"
)

// HeldView clones the family's held set at the current revision, after
// processing due expiry, like OpenSnapshot, but does not register the clone:
// it serves one read that needs no cursor (a fleet gap), so it neither counts
// against the snapshot caps nor evicts a caller's LIST snapshot. The result
// has ID 0 and cannot be resumed.
func (s *State) HeldView(now time.Time, fam string) *Snapshot {
	s.expireDue(now)
	return &Snapshot{Family: fam, Revision: s.revision, tree: s.cloneHeld(fam)}
}

// HeldView takes an unregistered view of the family's held set; see
// State.HeldView. The clone is O(1) on the actor; reading it happens on the
// caller's goroutine.
func (b *Broker) HeldView(ctx context.Context, fam string) (*Snapshot, error) {
	return call(ctx, b, func(s *State, now time.Time) (*Snapshot, error) {
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
