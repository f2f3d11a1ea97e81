package sse

import (
	"bytes"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

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

// blockingWriter holds every write until release is closed, once armed.
type blockingWriter struct {
	http.ResponseWriter
	armed   *atomic.Bool
	blocked chan struct{} // closed when a write is held
	release chan struct{}
}

func (b blockingWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

func (b blockingWriter) Write(p []byte) (int, error) {
	if b.armed.CompareAndSwap(true, false) {
		close(b.blocked)
		<-b.release
	}
	return b.ResponseWriter.Write(p)
}

// TestPoolBatchesWhileBusy: with one worker, events offered to a stream
// while the worker is busy with another are written together, in order,
// with one flush once the worker gets to it; none is written before.
func TestPoolBatchesWhileBusy(t *testing.T) {
	p := NewPool(1, time.Hour)
	busy, s := NewStream(DefaultCapacity), NewStream(DefaultCapacity)
	var flushes atomic.Int32
	var armed atomic.Bool
	hold := blockingWriter{armed: &armed, blocked: make(chan struct{}), release: make(chan struct{})}
	srv, client := startHTTP1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			hold.ResponseWriter = w
			_ = Serve(hold, r, busy, Options{Pool: p})
			return
		}
		_ = Serve(flushCounter{w, &flushes}, r, s, Options{Pool: p})
	}))
	for _, st := range []*Stream{busy, s} {
		st.Offer(ev("snapshot", ""))
	}
	busyDec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL+"/busy").Body)
	dec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL).Body)
	for _, d := range []*Decoder{busyDec, dec} {
		if got, err := d.Next(); err != nil || got.Name != "snapshot" {
			t.Fatalf("first event %+v, %v", got, err)
		}
	}
	if flushes.Load() != 1 {
		t.Fatalf("%d flushes before the changes, want 1", flushes.Load())
	}
	armed.Store(true)
	busy.Offer(ev("change", "busy"))
	<-hold.blocked // the one worker is writing busy
	for i := range 5 {
		s.Offer(ev("change", strconv.Itoa(i)))
	}
	time.Sleep(20 * time.Millisecond) // room for a wrong write to happen
	if n := flushes.Load(); n != 1 {
		t.Fatalf("%d flushes while the only worker was busy, want still 1", n)
	}
	close(hold.release)
	for i := range 5 {
		got, err := dec.Next()
		if err != nil || got.ID != strconv.Itoa(i) {
			t.Fatalf("change %d: %+v, %v", i, got, err)
		}
	}
	if n := flushes.Load(); n != 2 {
		t.Errorf("the five changes took %d flushes, want 1", n-1)
	}
	if got, err := busyDec.Next(); err != nil || got.ID != "busy" {
		t.Errorf("the busy stream's change: %+v, %v", got, err)
	}
	for _, st := range []*Stream{busy, s} {
		st.End(ev("shutdown", ""))
		waitDone(t, st)
	}
}

// TestPoolStalledClientDelaysOthersLittle: with one worker, a write
// blocked on a client that stopped reading (write timeout an hour) delays
// another stream's events by about MaxHold, not until the write gives up.
func TestPoolStalledClientDelaysOthersLittle(t *testing.T) {
	p := NewPool(1, 20*time.Millisecond)
	stalled, live := NewStream(DefaultCapacity), NewStream(DefaultCapacity)
	srv, writes := startStallServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := live
		if r.URL.Path == "/stalled" {
			s = stalled
		}
		_ = Serve(w, r, s, Options{Pool: p, WriteTimeout: time.Hour})
	}))
	stalled.Offer(ev("snapshot", ""))
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
	client := &http.Client{Timeout: 10 * time.Second} // bounds the reads too
	dec := NewDecoder(mustOpen(t, t.Context(), client, srv.URL+"/live").Body)
	if got, err := dec.Next(); err != nil || got.Name != "snapshot" {
		t.Fatalf("first event: %+v, %v", got, err)
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
	if n := p.Overtaken(); n < 1 {
		t.Errorf("Overtaken() = %d, want at least 1", n)
	}
	live.End(ev("shutdown", ""))
	waitDone(t, live)
}

// TestPoolWorkersEnd: workers run while streams are ready and end when
// none is (TestMain's leak check holds every test to it; this one counts).
func TestPoolWorkersEnd(t *testing.T) {
	p := NewPool(2, 0)
	streams := make([]*Stream, 8)
	srv, client := startHTTP1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		_ = Serve(w, r, streams[i], Options{Pool: p})
	}))
	var decs []*Decoder
	for i := range streams {
		streams[i] = NewStream(DefaultCapacity)
		streams[i].Offer(ev("snapshot", ""))
		decs = append(decs, NewDecoder(mustOpen(t, t.Context(), client, srv.URL+"?i="+strconv.Itoa(i)).Body))
		if _, err := decs[i].Next(); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for _, s := range streams {
			s.Offer(ev("change", strconv.Itoa(round)))
		}
		for i, d := range decs {
			if got, err := d.Next(); err != nil || got.ID != strconv.Itoa(round) {
				t.Fatalf("stream %d, round %d: %+v, %v", i, round, got, err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			p.mu.Lock()
			workers, ready := p.workers, len(p.ready)
			p.mu.Unlock()
			if workers == 0 && ready == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d workers and %d streams ready after every event was read", round, workers, ready)
			}
		}
	}
	for _, s := range streams {
		s.End(ev("shutdown", ""))
		waitDone(t, s)
	}
}
