package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWatchMarkerThenChanges(t *testing.T) {
	b := MustStartBroker(t)
	a := createSession(t, b, "", "worker-a", 600000)
	c := createSession(t, b, "", "worker-c", 600000)
	held := b.mustAcquire(t, a, "lease://acme/renderers/d1")
	ws := b.openWatch(t, watchOpts{}, "lease://acme/renderers/*")
	m := ws.marker(t)
	if m.Epoch != b.Epoch() || len(m.Subscriptions) != 1 || len(m.Subscriptions[0].Items) != 1 || m.Subscriptions[0].NextCursor != nil {
		t.Fatalf("marker = %+v", m)
	}
	sub := m.Subscriptions[0].ID

	// Immediate acquisition.
	l2 := b.mustAcquire(t, c, "lease://acme/renderers/d2")
	ch := ws.change(t)
	if ch.Kind != "acquired" || ch.Route != "lease://acme/renderers/d2" || ch.SubscriptionID != sub || ch.Item == nil || ch.Item.OwnerID != "worker-c" || ch.Revision <= m.Revision {
		t.Fatalf("acquired change = %+v", ch)
	}
	// Renewal, failed, fenced and queued-then-timed-out acquisitions emit nothing.
	b.extend(t, a, "lease://acme/renderers/d1", held.FencingToken, 20000)
	b.acquire(t, c, "lease://acme/renderers/d1", 1000, 0)
	b.release(t, c, "lease://acme/renderers/d2", l2.FencingToken+7)
	b.mustAcquire(t, a, "lease://acme/other/x") // does not match
	ws.quiet(t, 100*time.Millisecond)

	// Grant to a waiter: released, then acquired.
	done := make(chan *Response, 1)
	go func() { done <- b.acquire(t, c, "lease://acme/renderers/d1", 5000, 20000) }()
	waitFor(t, func() bool { return b.query(t, "lease://acme/renderers/d1").Waiters == 1 })
	b.release(t, a, "lease://acme/renderers/d1", held.FencingToken)
	if ch = ws.change(t); ch.Kind != "released" || ch.Item != nil {
		t.Fatalf("release change = %+v", ch)
	}
	if ch = ws.change(t); ch.Kind != "acquired" || ch.Item.OwnerID != "worker-c" {
		t.Fatalf("waiter grant change = %+v", ch)
	}
	<-done
	// Expiry, in expiry order: d1 (5 s), then d2 (10 s).
	b.Clock.Advance(10*time.Second + time.Millisecond)
	for _, want := range []string{"lease://acme/renderers/d1", "lease://acme/renderers/d2"} {
		if ch = ws.change(t); ch.Kind != "expired" || ch.Route != want {
			t.Fatalf("expiry change = %+v, want %s", ch, want)
		}
	}
	// Session end.
	b.mustAcquire(t, c, "lease://acme/renderers/d3")
	ws.change(t)
	b.Do(t, Request{Method: "DELETE", Path: "/v1/sessions/" + c})
	if ch = ws.change(t); ch.Kind != "session_closed" || ch.Route != "lease://acme/renderers/d3" {
		t.Fatalf("session end change = %+v", ch)
	}
}

func TestWatchValidatesBeforeRetaining(t *testing.T) {
	b := MustStartBroker(t, readerTok)
	cases := []struct {
		selectors []string
		status    int
		code      string
	}{
		{[]string{"lease://acme/r/*", "lease://acme/r/doc*"}, 400, "invalid_selector"},
		{[]string{"lease://acme/r/*", "lease://**"}, 403, "forbidden"},
	}
	for _, tc := range cases {
		ws, resp := b.tryWatch(t, watchOpts{token: readerTok.Secret}, tc.selectors...)
		if ws != nil {
			t.Fatalf("%v opened", tc.selectors)
		}
		wantProblem(t, resp, tc.status, tc.code)
	}
	if n := b.metric(t, "muster_watch_registrations_wildcard"); n != 0 {
		t.Fatalf("a refused open left %v registrations", n)
	}
	// The browser path: the token as access_token.
	ws := b.openWatch(t, watchOpts{token: readerTok.Secret, queryToken: true}, "lease://acme/**")
	ws.marker(t)
}

func TestWatchSupersedeAndLimits(t *testing.T) {
	b := MustStartBroker(t)
	s := createSession(t, b, "", "w", 600000)
	first := b.openWatch(t, watchOpts{session: s}, "lease://acme/a/*", "lease://acme/b/*")
	m1 := first.marker(t)
	second := b.openWatch(t, watchOpts{session: s}, "lease://acme/a/*")
	m2 := second.marker(t)
	if ev := first.next(t, 5*time.Second); ev.Name != "superseded" || !strings.Contains(string(ev.Data), `"revision":`) {
		t.Fatalf("older stream got %q %s, want superseded with its revision", ev.Name, ev.Data)
	}
	first.ended(t, 5*time.Second)
	if m2.Subscriptions[0].ID != m1.Subscriptions[0].ID {
		t.Fatal("a duplicate open did not keep the subscription id")
	}
	// 127 more wildcard registrations fit; the 129th fails; exact and
	// duplicate still succeed.
	var streams []*watchStream
	for i := 0; i < 127; i++ {
		ws := b.openWatch(t, watchOpts{session: s}, fmt.Sprintf("lease://r%d/*/*", i))
		ws.marker(t)
		streams = append(streams, ws)
	}
	_, resp := b.tryWatch(t, watchOpts{session: s}, "lease://one-more/*/*")
	wantProblem(t, resp, 429, "subscription_limit")
	b.openWatch(t, watchOpts{session: s}, "lease://exact/route/ok").marker(t)
	dup := b.openWatch(t, watchOpts{session: s}, "lease://r0/*/*")
	dup.marker(t)
	if ev := streams[0].next(t, 5*time.Second); ev.Name != "superseded" {
		t.Fatalf("duplicate at the cap: older stream got %q", ev.Name)
	}
	// Unsubscribe removes only its registration; a stream left with none ends.
	b.Do(t, Request{Method: "DELETE", Path: "/v1/sessions/" + s + "/subscriptions?selector=" + "lease://r1/*/*"})
	if ev := streams[1].next(t, 5*time.Second); ev.Name != "unsubscribed" {
		t.Fatalf("unsubscribed stream got %q", ev.Name)
	}
	if got := b.metric(t, "muster_watch_registrations_wildcard"); got != 128-1 {
		t.Fatalf("wildcard registrations = %v, want 127", got)
	}
	// The session's end ends every stream and removes every registration.
	b.Do(t, Request{Method: "DELETE", Path: "/v1/sessions/" + s})
	if ev := second.next(t, 5*time.Second); ev.Name != "session_closed" {
		t.Fatalf("after session end: %q", ev.Name)
	}
	waitFor(t, func() bool {
		return b.metric(t, "muster_watch_registrations_wildcard") == 0 && b.metric(t, "muster_watch_registrations_exact") == 0
	})
}

func TestWatchDisconnectCleansUp(t *testing.T) {
	b := MustStartBroker(t)
	ws := b.openWatch(t, watchOpts{}, "lease://**", "lease://a/b/c")
	ws.marker(t)
	if b.metric(t, "muster_watch_registrations_wildcard") != 1 || b.metric(t, "muster_watch_registrations_exact") != 1 {
		t.Fatal("registrations not counted")
	}
	ws.close()
	waitFor(t, func() bool {
		return b.metric(t, "muster_watch_registrations_wildcard") == 0 && b.metric(t, "muster_watch_registrations_exact") == 0 && b.metric(t, "muster_watch_streams") == 0
	})
	if n := b.metric(t, "muster_sessions"); n != 0 {
		t.Fatalf("the stream's read-only session survived it: %v sessions", n)
	}
}

// Overlapping selectors on one stream are independently notified.
func TestWatchOverlap(t *testing.T) {
	b := MustStartBroker(t)
	ws := b.openWatch(t, watchOpts{}, "lease://acme/**", "lease://acme/r/*", "lease://acme/r/x")
	m := ws.marker(t)
	s := createSession(t, b, "", "w", 600000)
	b.mustAcquire(t, s, "lease://acme/r/x")
	got := map[string]int64{}
	for i := 0; i < 3; i++ {
		c := ws.change(t)
		got[c.SubscriptionID] = c.Revision
	}
	for _, sub := range m.Subscriptions {
		if _, ok := got[sub.ID]; !ok {
			t.Fatalf("registration %s (%s) not notified: %v", sub.ID, sub.Selector, got)
		}
	}
	ws.quiet(t, 50*time.Millisecond)
}
