package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
)

// churn runs clients doing random acquire/release/extend on
// lease://churn/{a,b}/rNNN (routes per area) with TTLs of 100 ms up to
// maxTTL ms, and a clock that lets short leases expire, until stop is called.
func churn(t *testing.T, b *Broker, clients, routes, maxTTL int) (stop func()) {
	t.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		sess := createSession(t, b, "", fmt.Sprintf("churn-%d", c), 600000)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 5))
			tokens := map[string]int64{}
			for !done.Load() {
				route := fmt.Sprintf("lease://churn/%s/r%03d", []string{"a", "b"}[rng.IntN(2)], rng.IntN(routes))
				switch rng.IntN(3) {
				case 0:
					if resp := b.acquire(t, sess, route, 100+rng.IntN(maxTTL-100), 0); resp.Status == 200 {
						var l leaseBody
						resp.JSON(t, &l)
						tokens[route] = l.FencingToken
					}
				case 1:
					if tok, ok := tokens[route]; ok {
						b.release(t, sess, route, tok)
					}
				default:
					if tok, ok := tokens[route]; ok {
						b.extend(t, sess, route, tok, 100+rng.IntN(maxTTL-100))
					}
				}
			}
		}(c)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			b.Clock.Advance(10 * time.Millisecond)
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { done.Store(true); wg.Wait() }
}

// view is a client's live view: route → holder incarnation.
type view map[string]string

func (v view) apply(c changeBody) {
	if c.Kind == "acquired" {
		v[c.Route] = c.Item.HolderIncarnation
	} else {
		delete(v, c.Route)
	}
}

func (v view) equal(w map[string]string) bool {
	if len(v) != len(w) {
		return false
	}
	for k, x := range w {
		if v[k] != x {
			return false
		}
	}
	return true
}

// Bootstrap races, hundreds of times under churn: install the marker's
// items and the remaining pages, apply the events after the marker's
// revision, and the view equals the held set at the last applied revision,
// reconstructed from the core's event log. Ownership changes just before
// the stream opens, during paging and right after the last page, both from
// the churn and from explicit acquisitions at those points.
func TestWatchBootstrapUnderChurn(t *testing.T) {
	b := MustStartBroker(t)
	stop := churn(t, b, 4, 40, 600)
	defer stop()
	me := createSession(t, b, "", "bootstrapper", 600000)
	const raw = "lease://churn/a/*"
	sel, _ := core.ParseSelector(raw)
	for i := 0; i < 200; i++ {
		b.acquire(t, me, fmt.Sprintf("lease://churn/a/x%03d", i), 300, 0) // just before the stream opens
		ws := b.openWatch(t, watchOpts{}, raw)
		m := ws.marker(t)
		v := view{}
		for _, it := range m.Subscriptions[0].Items {
			v[it.Route] = it.HolderIncarnation
		}
		cursor := m.Subscriptions[0].NextCursor
		for cursor != nil {
			b.acquire(t, me, fmt.Sprintf("lease://churn/a/y%03d", i), 300, 0) // during paging
			resp, p := b.list(t, "", raw, 1+i%3, *cursor)
			if resp.Status != 200 {
				t.Fatalf("iteration %d: paging the marker's snapshot: %d %s", i, resp.Status, resp.Body)
			}
			if p.Snapshot.Revision != m.Revision {
				t.Fatalf("iteration %d: page revision %d, marker %d", i, p.Snapshot.Revision, m.Revision)
			}
			for _, it := range p.Items {
				v[it.Route] = it.HolderIncarnation
			}
			cursor = p.NextCursor
		}
		b.acquire(t, me, fmt.Sprintf("lease://churn/a/z%03d", i), 300, 0) // right after the last page
		last := m.Revision
		deadline := time.After(20 * time.Millisecond)
	drain:
		for {
			select {
			case ev := <-ws.events:
				var c changeBody
				if ev.Name != "change" || json.Unmarshal(ev.Data, &c) != nil {
					t.Fatalf("iteration %d: event %q", i, ev.Name)
				}
				if c.Revision <= last {
					t.Fatalf("iteration %d: revision %d after %d", i, c.Revision, last)
				}
				v.apply(c)
				last = c.Revision
			case <-deadline:
				break drain
			}
		}
		if want := heldAt(b.Events(), last, sel); !v.equal(want) {
			t.Fatalf("iteration %d: view at revision %d has %d routes, the broker held %d", i, last, len(v), len(want))
		}
		ws.close()
	}
}

// Completeness: every committed change matching a stream's selectors
// reaches it exactly once per matching registration, in revision order.
func TestWatchCompleteness(t *testing.T) {
	b := MustStartBroker(t)
	selectors := []string{"lease://churn/a/*", "lease://churn/**", "lease://*/b/r007"}
	ws := b.openWatch(t, watchOpts{}, selectors...)
	m := ws.marker(t)
	stop := churn(t, b, 4, 40, 600)
	time.Sleep(1500 * time.Millisecond)
	stop()
	events := b.Events()
	gotBy, wantBy := map[string][]string{}, map[string][]string{}
	for _, sub := range m.Subscriptions {
		sel, _ := core.ParseSelector(sub.Selector)
		var want []string
		for _, e := range events {
			if int64(e.Revision) > m.Revision && sel.Matches(e.Route()) {
				want = append(want, fmt.Sprintf("%d %s %s", e.Revision, e.Kind, e.Route()))
			}
		}
		wantBy[sub.ID] = want
	}
	total := 0
	for _, w := range wantBy {
		total += len(w)
	}
	var lastRev int64
	for n := 0; n < total; n++ {
		c := ws.change(t)
		if c.Revision < lastRev {
			t.Fatalf("revision %d after %d", c.Revision, lastRev)
		}
		lastRev = c.Revision
		gotBy[c.SubscriptionID] = append(gotBy[c.SubscriptionID], fmt.Sprintf("%d %s %s", c.Revision, c.Kind, c.Route))
	}
	ws.quiet(t, 100*time.Millisecond)
	for id, want := range wantBy {
		got := gotBy[id]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("registration %s: %d events, want %d", id, len(got), len(want))
		}
	}
	t.Logf("%d changes delivered across %d registrations", total, len(wantBy))
}
