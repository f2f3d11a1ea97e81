package core

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// State.Ready hands out each event with its deliveries and counts them;
// Overflowed drops a stream and counts it.
func TestReadyDeliveries(t *testing.T) {
	f := newLeaseFixture(t, 1)
	id := sid(1)
	if _, err := f.s.Subscribe(f.now, 1, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://acme/**")}, Caller: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Subscribe(f.now, 2, SubscribeRequest{Family: "acme", Anon: sid(50), Selectors: []Selector{mustSel(t, "lease://acme/renderers/doc-1")}, Caller: "c"}); err != nil {
		t.Fatal(err)
	}
	f.mustAcquire(1, rA)
	f.mustAcquire(1, rB)
	rd := f.s.Ready()
	if len(rd.Events) != 2 || len(rd.To) != 2 {
		t.Fatalf("ready: %d events, %d delivery lists", len(rd.Events), len(rd.To))
	}
	got := func(to []Delivery) []StreamID {
		var out []StreamID
		for _, d := range to {
			out = append(out, d.Stream)
		}
		slices.Sort(out)
		return out
	}
	if g := got(rd.To[0]); !slices.Equal(g, []StreamID{1, 2}) {
		t.Errorf("%s reaches streams %v, want [1 2]", rd.Events[0].Key, g)
	}
	if g := got(rd.To[1]); !slices.Equal(g, []StreamID{1}) {
		t.Errorf("%s reaches streams %v, want [1]", rd.Events[1].Key, g)
	}
	if st := f.s.Stats(); st.Changes != 2 || st.Deliveries != 3 {
		t.Errorf("stats: %d changes, %d deliveries; want 2, 3", st.Changes, st.Deliveries)
	}
	if rd := f.s.Ready(); len(rd.Events)+len(rd.To)+len(rd.Ends)+len(rd.Results) != 0 {
		t.Errorf("a second Ready is not empty: %+v", rd)
	}
	f.s.Overflowed(2)
	if st := f.s.Stats(); st.Overflows != 1 || st.Streams != 1 {
		t.Errorf("after overflow: %d overflows, %d streams; want 1, 1", st.Overflows, st.Streams)
	}
	if g := subIDs(t, f.s, "acme", rA.Key()); len(g) != 1 {
		t.Errorf("the overflowed stream is still matched: %v", g)
	}
}

// A change produced in the step that opens a stream (here: an expiry due
// when the stream opens) is in the marker's snapshot: it reaches the
// registrations as they were before the step, never the new stream, even
// when the new stream takes a registration over from an older one.
func TestSubscribeMatchesDueChangesFirst(t *testing.T) {
	for _, c := range []struct {
		name    string
		session bool // the new stream supersedes stream 1's registration
	}{{"NewRegistration", false}, {"Superseding", true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newLeaseFixture(t, 1, 2)
			watcher := sid(2)
			old, err := f.s.Subscribe(f.now, 1, SubscribeRequest{Family: "acme", Session: &watcher, Selectors: []Selector{mustSel(t, "lease://acme/**")}, Caller: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := f.acquire(1, rA, time.Second, 0); err != nil {
				t.Fatal(err)
			}
			f.s.Ready()
			var sess *SessionID
			if c.session {
				sess = &watcher
			}
			ws, err := f.s.Subscribe(f.now.Add(2*time.Second), 2, SubscribeRequest{Family: "acme", Session: sess, Anon: sid(60), Selectors: []Selector{mustSel(t, "lease://acme/**")}, Caller: "c"})
			if err != nil {
				t.Fatal(err)
			}
			rd := f.s.Ready()
			if len(rd.Events) != 1 || rd.Events[0].Kind != Expired {
				t.Fatalf("events of the step: %+v", rd.Events)
			}
			if want := []Delivery{{Stream: 1, SubscriptionID: old.Subscriptions[0].ID}}; !slices.Equal(rd.To[0], want) {
				t.Errorf("the expiry reaches %+v, want %+v", rd.To[0], want)
			}
			if ws.Revision != rd.Events[0].Revision || len(ws.Subscriptions[0].Page.Items) != 0 {
				t.Errorf("marker at %d with %d items, want at the expiry's revision %d without the lease",
					ws.Revision, len(ws.Subscriptions[0].Page.Items), rd.Events[0].Revision)
			}
			wantEnds := []StreamEnd(nil)
			if c.session {
				wantEnds = []StreamEnd{{1, EndSuperseded}}
			}
			if !slices.Equal(rd.Ends, wantEnds) {
				t.Errorf("ends = %+v, want %+v", rd.Ends, wantEnds)
			}
		})
	}
}

// manualClock is a clock the test moves.
type manualClock struct{ ns atomic.Int64 }

func (c *manualClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func newManualClock(at time.Time) *manualClock {
	c := &manualClock{}
	c.ns.Store(at.UnixNano())
	return c
}

// recorder records what the actor hands one stream.
type recorder struct {
	mu  *sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *recorder) Change(c *Change, sub string) bool {
	first := c.Shared == nil
	if first {
		c.Shared = c.Event.Revision
	} else if c.Shared != c.Event.Revision {
		r.add("shared value of another change")
	}
	r.add(fmt.Sprintf("%s %s@%d first=%v", c.Event.Kind, c.Event.Key, c.Event.Revision, first))
	return true
}

func (r *recorder) End(reason StreamEndReason, rev Revision) {
	r.add(fmt.Sprintf("end %s@%d", reason, rev))
}

// Broker.Watch is one step: the marker is the new stream's first event,
// the changes before it are in it and never reach the stream, the changes
// after it follow it; one *Change is shared by the deliveries of an event.
func TestBrokerWatchOneStep(t *testing.T) {
	clock := newManualClock(t0)
	b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, clock, nil)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: MaxSessionTTL}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	open := func(st *recorder, anon SessionID) {
		t.Helper()
		_, err := b.Watch(ctx, WatchRequest{SubscribeRequest: SubscribeRequest{Family: "acme", Anon: anon, Selectors: []Selector{mustSel(t, "lease://acme/**")}, Caller: "c"}, Sink: st,
			Start: func(ws WatchStart) {
				st.add(fmt.Sprintf("marker@%d items=%d", ws.Revision, len(ws.Subscriptions[0].Page.Items)))
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	a, n := &recorder{mu: &mu}, &recorder{mu: &mu}
	open(a, sid(70))
	if _, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: rA, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Second) // rA is due: the tick or the Watch step expires it
	open(n, sid(71))
	if _, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: rB, TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stats(ctx); err != nil { // the acquire's step has been handed out
		t.Fatal(err)
	}
	wantA := []string{"marker@0 items=0", "acquired acme/renderers/doc-1@1 first=true", "expired acme/renderers/doc-1@2 first=true", "acquired acme/renderers/doc-2@3 first=true"}
	wantN := []string{"marker@2 items=0", "acquired acme/renderers/doc-2@3 first=false"}
	if got := a.lines(); !slices.Equal(got, wantA) {
		t.Errorf("older stream:\n got %q\nwant %q", got, wantA)
	}
	if got := n.lines(); !slices.Equal(got, wantN) {
		t.Errorf("new stream:\n got %q\nwant %q", got, wantN)
	}
}
