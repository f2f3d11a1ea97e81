package sse

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// changeEvent is a typical change event of the broker.
var changeEvent = Event{
	Name: "change",
	ID:   "1234567",
	Data: []byte(`{"subscription_id":"sub_6f1c2a","route":"lease://acme/renderers/document-123","kind":"acquired","revision":1234567,` +
		`"item":{"route":"lease://acme/renderers/document-123","owner_id":"worker-17","holder_incarnation":"hi_9b2e41d0",` +
		`"acquired_at":"2025-01-01T00:00:00Z","expires_at":"2025-01-01T00:00:30Z","remaining_ms":30000,"renewals":0}}`),
}

// BenchmarkOffer is the actor's cost per event and stream. The writer's
// take is done inline every capacity events.
func BenchmarkOffer(b *testing.B) {
	s := NewStream(DefaultCapacity)
	var spare []Event
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%DefaultCapacity == 0 {
			bt := s.take(spare)
			clear(bt.events)
			spare = bt.events[:0]
		}
		s.Offer(changeEvent)
	}
}

// BenchmarkOfferRefused is the cost of an offer to an ended stream.
func BenchmarkOfferRefused(b *testing.B) {
	s := NewStream(1)
	s.End(changeEvent)
	b.ReportAllocs()
	for b.Loop() {
		s.Offer(changeEvent)
	}
}

// BenchmarkOfferContended offers while another goroutine takes batches as
// fast as it can, the worst case for the stream's mutex.
func BenchmarkOfferContended(b *testing.B) {
	s := NewStream(1 << 30)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var spare []Event
		for {
			select {
			case <-stop:
				return
			case <-s.wake:
			}
			bt := s.take(spare)
			clear(bt.events)
			spare = bt.events[:0]
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		s.Offer(changeEvent)
	}
	b.StopTimer()
	close(stop)
	<-done
}

// BenchmarkAppendEvent is the framing cost per event.
func BenchmarkAppendEvent(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(AppendEvent(nil, changeEvent))))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEvent(buf[:0], changeEvent)
	}
}

// BenchmarkDecoder is the parsing cost per event.
func BenchmarkDecoder(b *testing.B) {
	var wire []byte
	for range 1000 {
		wire = AppendEvent(wire, changeEvent)
	}
	b.SetBytes(int64(len(wire) / 1000))
	b.ReportAllocs()
	r := bytes.NewReader(wire)
	dec := NewDecoder(r)
	for b.Loop() {
		if _, err := dec.Next(); err == io.EOF {
			r.Reset(wire)
			dec = NewDecoder(r)
		}
	}
}

// BenchmarkServe is the end-to-end cost per event over loopback HTTP/1.1
// and HTTP/2, from Offer to a decoded event on the client.
func BenchmarkServe(b *testing.B) {
	for _, p := range protos[:2] {
		b.Run(p.name, func(b *testing.B) {
			s := NewStream(1 << 30)
			url, client, errc := mustServe(b, p, s, Options{})
			resp := mustOpen(b, context.Background(), client, url)
			dec := NewDecoder(resp.Body)
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				for range b.N {
					s.Offer(changeEvent)
				}
				s.End(shutdownEvent)
			}()
			n := 0
			for {
				_, err := dec.Next()
				if err != nil {
					break
				}
				n++
			}
			b.StopTimer()
			if n != b.N+1 {
				b.Fatalf("got %d events, want %d", n, b.N+1)
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// idleCost measures the server-side memory (live heap and goroutine stacks)
// per idle connection: n raw HTTP/1.1 clients open a request each and stay
// idle. The client side (a bare TCP connection) is included and small.
func idleCost(tb testing.TB, n int, h http.HandlerFunc) float64 {
	tb.Helper()
	active := make(chan struct{}, n)
	srv, _ := startStallServer(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		active <- struct{}{}
		h(w, r)
	}))
	addr := srv.Listener.Addr().String()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, n)
	for range n {
		conns = append(conns, dialStalled(tb, addr, "/watch"))
	}
	for range n {
		<-active
	}
	runtime.GC()
	runtime.GC() // empty the pools' victim caches, shrink stacks
	runtime.ReadMemStats(&after)
	for _, c := range conns {
		c.Close()
	}
	srv.Close() // waits for the handlers, so the next measurement starts clean
	live := func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc + m.StackInuse) }
	return (live(&after) - live(&before)) / float64(n)
}

// sseIdle serves an idle stream.
func sseIdle(w http.ResponseWriter, r *http.Request) {
	s := NewStream(DefaultCapacity)
	s.Offer(Event{Name: "snapshot", Data: []byte("{}")})
	_ = Serve(w, r, s, Options{})
}

// bareIdle is the least a streaming handler can do: headers, one flush,
// wait for the client to go.
func bareIdle(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	_ = http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// TestIdleStreamMemory holds the per-stream budget: an idle stream,
// including net/http's connection and both goroutine stacks, costs at most
// 32 KiB on the server.
func TestIdleStreamMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates stacks and heap")
	}
	const n = 200
	bare := idleCost(t, n, bareIdle)
	perStream := idleCost(t, n, sseIdle)
	t.Logf("idle stream: %.0f B; bare net/http streaming handler: %.0f B; sse overhead %.0f B", perStream, bare, perStream-bare)
	if perStream > 32<<10 {
		t.Errorf("an idle stream costs %.0f B, budget 32 KiB", perStream)
	}
}

// BenchmarkIdleStream reports the memory per idle stream (B/stream) next to
// a bare net/http streaming handler.
func BenchmarkIdleStream(b *testing.B) {
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
	}{{"SSE", sseIdle}, {"BareHandler", bareIdle}} {
		b.Run(c.name, func(b *testing.B) {
			var cost float64
			for b.Loop() {
				cost = idleCost(b, 200, c.h)
			}
			b.ReportMetric(cost, "B/stream")
			b.ReportMetric(0, "ns/op")
		})
	}
}
