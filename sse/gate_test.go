package sse

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGateOrder: passes are granted in the order asked for.
func TestGateOrder(t *testing.T) {
	g := NewGate(1, time.Hour)
	first := newPass()
	g.enter(first)
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 20 {
		p := newPass()
		wg.Go(func() {
			g.enter(p)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			g.leave(p)
		})
		for waiting(g) != i+1 { // each waits before the next asks
			time.Sleep(time.Millisecond)
		}
	}
	g.leave(first)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("granted in order %v", order)
		}
	}
	if g.free != 1 || len(g.held) != 0 {
		t.Errorf("after all left: %d free, %d held; want 1, 0", g.free, len(g.held))
	}
}

// TestGateBound: a gate of 3 lets exactly 3 writers in while they hold
// their passes; the others wait, and get in as passes come back.
func TestGateBound(t *testing.T) {
	g := NewGate(3, time.Hour)
	var in, most atomic.Int32
	proceed := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		p := newPass()
		wg.Go(func() {
			g.enter(p)
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-proceed
			in.Add(-1)
			g.leave(p)
		})
	}
	for deadline := time.Now().Add(10 * time.Second); in.Load() < 3 || waiting(g) < 7; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(proceed)
			t.Fatalf("%d writers in and %d waiting, want 3 and 7", in.Load(), waiting(g))
		}
	}
	if n := in.Load(); n != 3 {
		t.Errorf("%d writers in with a gate of 3", n)
	}
	close(proceed)
	wg.Wait()
	if n := most.Load(); n != 3 {
		t.Errorf("at most %d writers were in at once, want 3", n)
	}
	if g.free != 3 || len(g.held) != 0 {
		t.Errorf("after all left: %d free, %d held; want 3, 0", g.free, len(g.held))
	}
}

func waiting(g *Gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// TestGateOvertakesAStuckHolder: a holder that does not leave delays the
// next writer by about MaxHold, not for as long as it holds on; its late
// leave does not add a pass.
func TestGateOvertakesAStuckHolder(t *testing.T) {
	const maxHold = 20 * time.Millisecond
	g := NewGate(1, maxHold)
	stuck := newPass()
	g.enter(stuck)
	start := time.Now()
	next := newPass()
	g.enter(next) // blocks until overtaken
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the next writer waited %v for a stuck holder, MaxHold %v", d, maxHold)
	}
	if n := g.Overtaken(); n != 1 {
		t.Errorf("Overtaken() = %d, want 1", n)
	}
	g.leave(stuck) // late: its pass was handed on already
	g.mu.Lock()
	free, held := g.free, len(g.held)
	g.mu.Unlock()
	if free != 0 || held != 1 {
		t.Fatalf("after the stuck holder left late: %d free, %d held; want 0 and 1", free, held)
	}
	g.leave(next)
	if g.free != 1 || len(g.held) != 0 {
		t.Fatalf("after all left: %d free, %d held; want 1, 0", g.free, len(g.held))
	}
}

// flushCounter counts the flushes of a stream's writer.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int32
}

func (f flushCounter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (f flushCounter) FlushError() error {
	f.n.Add(1)
	return http.NewResponseController(f.ResponseWriter).Flush()
}

// TestGateBatchesWhileWaiting: events offered while the stream's writer
// waits for a pass are written together, in order, with one flush once
// it gets one; none is written before.
func TestGateBatchesWhileWaiting(t *testing.T) {
	g := NewGate(1, time.Hour)
	s := NewStream(DefaultCapacity)
	var flushes atomic.Int32
	srv, client := startHTTP1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = Serve(flushCounter{w, &flushes}, r, s, Options{Gate: g})
	}))
	// Two events in the first batch: the stream is behind, so its next
	// turn asks for a pass.
	s.Offer(ev("snapshot", ""))
	s.Offer(ev("change", "first"))
	dec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL).Body)
	for _, want := range []string{"snapshot", "change"} {
		if got, err := dec.Next(); err != nil || got.Name != want {
			t.Fatalf("first events: %+v, %v; want %s", got, err, want)
		}
	}
	if flushes.Load() != 1 {
		t.Fatalf("%d flushes before the changes, want 1", flushes.Load())
	}
	held := newPass()
	g.enter(held)
	for i := range 5 {
		s.Offer(ev("change", strconv.Itoa(i)))
	}
	for waiting(g) != 1 { // the writer woke and waits for the pass
		time.Sleep(time.Millisecond)
	}
	if n := flushes.Load(); n != 1 {
		t.Fatalf("%d flushes while the writer waited for a pass, want still 1", n)
	}
	g.leave(held)
	for i := range 5 {
		got, err := dec.Next()
		if err != nil || got.ID != strconv.Itoa(i) {
			t.Fatalf("change %d: %+v, %v", i, got, err)
		}
	}
	if n := flushes.Load(); n != 2 {
		t.Errorf("the five changes took %d flushes, want 1", n-1)
	}
	s.End(ev("shutdown", ""))
	waitDone(t, s)
	if g.free != 1 {
		t.Errorf("the writer returned holding a pass: %d free", g.free)
	}
}

// TestGateStalledClientDelaysOthersLittle: with one pass, a writer blocked
// on a client that stopped reading (write timeout an hour) delays another
// stream's events by about MaxHold, not until its write gives up.
func TestGateStalledClientDelaysOthersLittle(t *testing.T) {
	g := NewGate(1, 20*time.Millisecond)
	stalled, live := NewStream(DefaultCapacity), NewStream(DefaultCapacity)
	srv, writes := startStallServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := live
		if r.URL.Path == "/stalled" {
			s = stalled
		}
		_ = Serve(w, r, s, Options{Gate: g, WriteTimeout: time.Hour})
	}))
	// Each stream's first batch has two events: both are behind, so each
	// later turn asks for a pass.
	stalled.Offer(ev("snapshot", ""))
	stalled.Offer(ev("change", "first"))
	dialStalled(t, srv.Listener.Addr().String(), "/stalled")
	payload := bytes.Repeat([]byte("x"), 16<<10)
	for i := range 128 { // far more than the socket buffers hold
		stalled.Offer(Event{Name: "change", ID: strconv.Itoa(i), Data: payload})
	}
	for {
		if _, ok := writes.stalled(50 * time.Millisecond); ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	live.Offer(ev("snapshot", ""))
	live.Offer(ev("change", "first"))
	client := &http.Client{Timeout: 10 * time.Second} // bounds the reads too
	dec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL+"/live").Body)
	for _, want := range []string{"snapshot", "change"} {
		if got, err := dec.Next(); err != nil || got.Name != want {
			t.Fatalf("first events: %+v, %v; want %s", got, err, want)
		}
	}
	for i := range 3 {
		start := time.Now()
		live.Offer(ev("change", strconv.Itoa(i)))
		got, err := dec.Next()
		if err != nil || got.ID != strconv.Itoa(i) {
			t.Fatalf("change %d: %+v, %v", i, got, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("change %d took %v behind a stalled stream", i, d)
		}
	}
	select {
	case <-stalled.Done():
		t.Fatal("the stalled stream's writer returned: the test stalled nothing")
	default:
	}
	live.End(ev("shutdown", ""))
	waitDone(t, live)
}

// TestGateSkippedWhileKeepingUp: a stream whose batches carry one event
// each does not wait for a pass, even when none is free.
func TestGateSkippedWhileKeepingUp(t *testing.T) {
	g := NewGate(1, time.Hour)
	held := newPass()
	g.enter(held) // and never given back
	s := NewStream(DefaultCapacity)
	srv, client := startHTTP1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = Serve(w, r, s, Options{Gate: g})
	}))
	s.Offer(ev("snapshot", ""))
	client.Timeout = 10 * time.Second // bounds the reads too
	dec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL).Body)
	for i := range 5 {
		if i > 0 {
			s.Offer(ev("change", strconv.Itoa(i)))
		}
		if got, err := dec.Next(); err != nil {
			t.Fatalf("event %d: %+v, %v", i, got, err)
		}
	}
	if n := waiting(g); n != 0 {
		t.Errorf("%d writers waited for a pass", n)
	}
	s.End(ev("shutdown", ""))
	waitDone(t, s)
	g.leave(held)
}
