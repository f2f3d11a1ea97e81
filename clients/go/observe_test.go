package muster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestObserveOptionsRefused(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1", "")
	for name, opt := range map[string]ObserveOption{
		"NegativeTTL":     WithShortestTTL(-time.Second),
		"ZeroInterval":    WithReconcileInterval(0),
		"TinyInterval":    WithReconcileInterval(time.Millisecond),
		"NegativeJitter":  WithReconcileJitter(-0.1),
		"JitterOne":       WithReconcileJitter(1),
		"JitterNaN":       WithReconcileJitter(nanFloat()),
		"PageSizeZero":    WithPageSize(0),
		"PageSizeTooLong": WithPageSize(501),
	} {
		t.Run(name, func(t *testing.T) {
			o, err := c.Observe(context.Background(), "lease://a/b/*", opt)
			if !errors.Is(err, ErrInvalidRequest) || o != nil {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func nanFloat() float64 {
	zero := 0.0
	return zero / zero
}

func TestReconcileInterval(t *testing.T) {
	tests := []struct {
		ttl, want time.Duration
	}{
		{0, 60 * time.Second},
		{time.Second, 5 * time.Second},
		{10 * time.Second, 5 * time.Second},
		{30 * time.Second, 15 * time.Second},
		{2 * time.Minute, 60 * time.Second},
		{10 * time.Minute, 60 * time.Second},
	}
	for _, tc := range tests {
		if got := ReconcileInterval(tc.ttl); got != tc.want {
			t.Errorf("ReconcileInterval(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
	for range 1000 {
		if d := jittered(10*time.Second, 0.2); d < 8*time.Second || d > 12*time.Second {
			t.Fatalf("jittered out of ±20%%: %v", d)
		}
	}
	if d := jittered(10*time.Second, 0); d != 10*time.Second {
		t.Fatalf("no jitter: %v", d)
	}
	b := newBackoff(50*time.Millisecond, 2*time.Second)
	var prevMax time.Duration = 50 * time.Millisecond
	for i := range 10 {
		d := b.next()
		if d < prevMax/2 || d > prevMax {
			t.Fatalf("backoff %d: %v outside [%v, %v]", i, d, prevMax/2, prevMax)
		}
		prevMax = min(prevMax*2, 2*time.Second)
	}
}

// fakeBroker speaks the watch and LIST contract from scripts: each watch
// request takes the next script (the last one repeats).
type fakeBroker struct {
	t       testing.TB
	mu      sync.Mutex
	scripts []func(w http.ResponseWriter, r *http.Request)
	watches atomic.Int64
	open    atomic.Int64 // watch requests in progress
	maxOpen atomic.Int64
	list    func(w http.ResponseWriter, r *http.Request)
}

func newFakeBroker(t testing.TB) (*fakeBroker, *httptest.Server) {
	f := &fakeBroker{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/leases/watch":
			n := f.watches.Add(1)
			open := f.open.Add(1)
			defer f.open.Add(-1)
			for {
				m := f.maxOpen.Load()
				if open <= m || f.maxOpen.CompareAndSwap(m, open) {
					break
				}
			}
			f.mu.Lock()
			s := f.scripts[min(int(n)-1, len(f.scripts)-1)]
			f.mu.Unlock()
			s(w, r)
		case "/v1/leases":
			f.list(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	return f, srv
}

func sseWrite(w http.ResponseWriter, name string, v any) {
	data, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	w.(http.Flusher).Flush()
}

func wireItem(route, owner string) map[string]any {
	return map[string]any{"route": route, "owner_id": owner, "holder_incarnation": "inc-" + owner,
		"acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-01T00:01:00Z", "remaining_ms": 60000, "renewals": 0}
}

func marker(epoch string, rev int64, cursor any, items ...map[string]any) map[string]any {
	if items == nil {
		items = []map[string]any{}
	}
	return map[string]any{"epoch": epoch, "revision": rev, "subscriptions": []any{
		map[string]any{"id": "sub-1", "selector": "lease://acme/r/*", "items": items, "next_cursor": cursor}}}
}

func change(rev int64, kind, route, owner string) map[string]any {
	c := map[string]any{"subscription_id": "sub-1", "route": route, "kind": kind, "revision": rev}
	if kind == "acquired" {
		c["item"] = wireItem(route, owner)
	}
	return c
}

func routes(v View) []string {
	out := make([]string, len(v.Items))
	for i, it := range v.Items {
		out[i] = it.Route + "=" + it.OwnerID
	}
	return out
}

func waitView(tb testing.TB, o *Observer, want string) View {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := o.Changed()
		v := o.View()
		if v.Ready && fmt.Sprint(routes(v)) == want {
			return v
		}
		select {
		case <-ch:
		case <-deadline:
			tb.Fatalf("view %v (ready %v, err %v), want %s", routes(v), v.Ready, o.Err(), want)
		}
	}
}

// The bootstrap of design §9 step by step: the changes that arrive while
// the rest of the snapshot is paged are buffered, those at or below the
// marker's revision are dropped, the rest applied after the pages.
func TestObserverBootstrapOrder(t *testing.T) {
	f, srv := newFakeBroker(t)
	streamed := make(chan struct{})
	f.scripts = append(f.scripts, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseWrite(w, "snapshot", marker("e1", 10, "cur-1", wireItem("lease://acme/r/a", "w1")))
		sseWrite(w, "change", change(9, "released", "lease://acme/r/b", "")) // stale: below the marker
		sseWrite(w, "change", change(11, "released", "lease://acme/r/a", ""))
		sseWrite(w, "change", change(12, "acquired", "lease://acme/r/c", "w3"))
		close(streamed)
		<-r.Context().Done()
	})
	f.list = func(w http.ResponseWriter, r *http.Request) {
		<-streamed // the page arrives after the changes
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"items": []any{wireItem("lease://acme/r/b", "w2")},
			"snapshot": map[string]any{"epoch": "e1", "revision": 10}})
	}
	c := newClient(t, srv.URL, "")
	o, err := c.Observe(context.Background(), "lease://acme/r/*", WithReconcileJitter(0))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.WaitReady(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	v := waitView(t, o, "[lease://acme/r/b=w2 lease://acme/r/c=w3]")
	if v.Revision != 12 || v.Epoch != "e1" {
		t.Fatalf("view at %s/%d", v.Epoch, v.Revision)
	}
}

// A stream that ends makes the view not ready and starts one recovery at a
// time, backing off while the failures repeat.
func TestObserverRecoveryBacksOff(t *testing.T) {
	f, srv := newFakeBroker(t)
	f.scripts = append(f.scripts, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sseWrite(w, "snapshot", marker("e1", 1, nil, wireItem("lease://acme/r/a", "w1")))
		sseWrite(w, "overflow", map[string]any{"reason": "overflow"})
	})
	c := newClient(t, srv.URL, "")
	o, err := c.Observe(context.Background(), "lease://acme/r/*")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	o.Close()
	// 50+100+200+400+800 ms of backoff (jittered down to half) fit about
	// 6..10 attempts in 1.5 s; without backoff it would be hundreds.
	if n := f.watches.Load(); n < 4 || n > 12 {
		t.Fatalf("%d watch requests in 1.5 s", n)
	}
	if f.maxOpen.Load() > 1 {
		t.Fatalf("%d bootstraps ran at once", f.maxOpen.Load())
	}
	st := o.Stats()
	// A bootstrap may complete (then the overflow is a recovery) or fail
	// (the overflow came before the pages were in): either way an attempt.
	if st.Attempts != f.watches.Load() || st.Bootstraps < 1 || st.Recoveries < st.Bootstraps-1 || st.Recoveries > st.Bootstraps {
		t.Fatalf("stats %+v", st)
	}
	if !errors.Is(o.Err(), ErrClosed) {
		t.Fatalf("err after close: %v", o.Err())
	}
}

func TestObserverStopsOnFatalError(t *testing.T) {
	f, srv := newFakeBroker(t)
	f.scripts = append(f.scripts, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(403)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Forbidden","status":403,"code":"forbidden"}`))
	})
	c := newClient(t, srv.URL, "")
	o, err := c.Observe(context.Background(), "lease://acme/r/*")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	select {
	case <-o.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the observer kept retrying a forbidden selector")
	}
	if err := o.WaitReady(context.Background()); !errors.Is(err, ErrForbidden) {
		t.Fatalf("got %v", err)
	}
	if f.watches.Load() != 1 {
		t.Fatalf("%d attempts", f.watches.Load())
	}
}

// Close is prompt while a page request hangs, and while the marker is late.
func TestObserverCloseIsPrompt(t *testing.T) {
	for _, where := range []string{"page", "marker"} {
		t.Run(where, func(t *testing.T) {
			f, srv := newFakeBroker(t)
			hung := make(chan struct{}, 1)
			f.scripts = append(f.scripts, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				if where == "marker" {
					hung <- struct{}{}
					<-r.Context().Done()
					return
				}
				sseWrite(w, "snapshot", marker("e1", 1, "cur"))
				<-r.Context().Done()
			})
			f.list = func(w http.ResponseWriter, r *http.Request) {
				hung <- struct{}{}
				<-r.Context().Done()
			}
			c := newClient(t, srv.URL, "")
			o, err := c.Observe(context.Background(), "lease://acme/r/*")
			if err != nil {
				t.Fatal(err)
			}
			<-hung
			start := time.Now()
			o.Close()
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("Close took %v", d)
			}
			if o.Ready() {
				t.Fatal("ready without a bootstrap")
			}
		})
	}
}

// A periodic reconciliation replaces the view in the background: the view
// stays ready meanwhile, and a change the stream never delivered is repaired.
func TestObserverReconcileRepairs(t *testing.T) {
	f, srv := newFakeBroker(t)
	f.scripts = append(f.scripts,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseWrite(w, "snapshot", marker("e1", 5, nil, wireItem("lease://acme/r/a", "w1")))
			<-r.Context().Done() // the release of a at 6 is never delivered
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseWrite(w, "snapshot", marker("e1", 7, nil, wireItem("lease://acme/r/b", "w2")))
			<-r.Context().Done()
		})
	c := newClient(t, srv.URL, "")
	o, err := c.Observe(context.Background(), "lease://acme/r/*", WithReconcileInterval(300*time.Millisecond), WithReconcileJitter(0))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	waitView(t, o, "[lease://acme/r/a=w1]")
	v := waitView(t, o, "[lease://acme/r/b=w2]")
	if v.Revision != 7 {
		t.Fatalf("revision %d", v.Revision)
	}
	st := o.Stats()
	if st.Reconciliations < 1 || st.Recoveries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A new epoch replaces the whole view, whatever the old one held.
func TestObserverEpochChange(t *testing.T) {
	f, srv := newFakeBroker(t)
	f.scripts = append(f.scripts,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseWrite(w, "snapshot", marker("e1", 50, nil, wireItem("lease://acme/r/a", "w1")))
			time.Sleep(200 * time.Millisecond) // then the broker dies
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sseWrite(w, "snapshot", marker("e2", 3, nil))
			sseWrite(w, "change", change(4, "acquired", "lease://acme/r/z", "w9"))
			<-r.Context().Done()
		})
	c := newClient(t, srv.URL, "")
	o, err := c.Observe(context.Background(), "lease://acme/r/*")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	waitView(t, o, "[lease://acme/r/a=w1]")
	// Revision 4 < 50: only a fresh bootstrap (not revision filtering)
	// can take the new epoch's changes.
	v := waitView(t, o, "[lease://acme/r/z=w9]")
	if v.Epoch != "e2" || v.Revision != 4 {
		t.Fatalf("view %+v", v)
	}
}
