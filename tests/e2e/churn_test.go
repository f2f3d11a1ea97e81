package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/musterhq/muster/core"
)

// heldAt reconstructs the held set at revision rev from the core's event
// log: route → holder incarnation.
func heldAt(events []core.Event, rev int64, sel core.Selector) map[string]string {
	held := map[string]string{}
	for _, e := range events {
		if int64(e.Revision) > rev {
			break
		}
		r := e.Route()
		if e.Kind == core.Acquired {
			held[r.String()] = e.Item.HolderIncarnation()
		} else {
			delete(held, r.String())
		}
	}
	for r := range held {
		if rt, _ := core.ParseRoute(r); !sel.Matches(rt) {
			delete(held, r)
		}
	}
	return held
}

// Paging with limit 1..3 over hundreds of leases while other clients
// acquire, release, renew and let leases expire: the union of a snapshot's
// pages equals the held set at the snapshot's revision, exactly.
func TestListPaginationUnderChurn(t *testing.T) {
	b := MustStartBroker(t)
	const n = 400
	var sessions []string
	for i := 0; i < 4; i++ {
		sessions = append(sessions, createSession(t, b, "", fmt.Sprintf("churn-%d", i), 600000))
	}
	for i := 0; i < 300; i++ {
		b.mustAcquire(t, sessions[i%4], fmt.Sprintf("lease://churn/a/r%03d", i))
	}
	stop := churn(t, b, 4, n, 2200)
	selectors := []string{"lease://churn/a/*", "lease://*/a/*", "lease://churn/**"}
	for round := 0; round < 24; round++ {
		raw := selectors[round%len(selectors)]
		sel, _ := core.ParseSelector(raw)
		items, rev := b.listAll(t, "", raw, 1+round%3)
		got := map[string]string{}
		for _, it := range items {
			if _, dup := got[it.Route]; dup {
				t.Fatalf("round %d: %s listed twice", round, it.Route)
			}
			got[it.Route] = it.HolderIncarnation
		}
		want := heldAt(b.Events(), rev, sel)
		if len(got) != len(want) {
			t.Fatalf("round %d (%s at revision %d): %d items, want %d", round, raw, rev, len(got), len(want))
		}
		for r, inc := range want {
			if got[r] != inc {
				t.Fatalf("round %d: %s holder %q, want %q at revision %d", round, r, got[r], inc, rev)
			}
		}
		if !slices.IsSortedFunc(items, func(a, b itemBody) int { return cmpString(a.Route, b.Route) }) {
			t.Fatalf("round %d: pages are not in route order", round)
		}
	}
	stop()
	t.Logf("events recorded: %d", len(b.Events()))
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
