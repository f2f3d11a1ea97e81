package handlers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/sse"
)

// benchWatchServer is a Server with only what watch streams use, on a
// broker holding areas×perArea leases of family acme
// (lease://acme/area-NN/res-NNNN), and the session that holds them.
func benchWatchServer(b *testing.B, areas, perArea int) (*Server, core.SessionID) {
	b.Helper()
	br := core.NewBroker(core.Config{Epoch: "e", IncarnationKey: []byte("k")}, core.SystemClock{}, nil)
	b.Cleanup(br.Close)
	var id core.SessionID
	id[0] = 1
	err := br.Exec(context.Background(), func(s *core.State, now time.Time) error {
		if _, err := s.CreateSession(now, core.SessionRequest{Family: "acme", ID: id, OwnerID: "bench", TTL: core.MaxSessionTTL}); err != nil {
			return err
		}
		for a := range areas {
			for r := range perArea {
				route := core.Route{Realm: "acme", Area: fmt.Sprintf("area-%02d", a), Resource: fmt.Sprintf("res-%04d", r)}
				if _, _, err := s.Acquire(now, core.AcquireRequest{Family: "acme", Session: id, Route: route, TTL: core.MaxLeaseTTL}); err != nil {
					return err
				}
			}
		}
		s.TakeEvents()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{broker: br, clock: core.SystemClock{}, metrics: NewMetrics(br), cursors: core.NewCursorCodec([]byte("master"), br.Epoch())}
	return s, id
}

var benchCaller = &Caller{Name: "bench", Family: "acme"}

func benchOpen(b *testing.B, s *Server, sels ...string) (*sse.Stream, core.StreamID) {
	b.Helper()
	req := core.WatchRequest{SubscribeRequest: core.SubscribeRequest{Family: "acme", Caller: snapshotOwner(benchCaller)}}
	for _, raw := range sels {
		sel, err := core.ParseSelector(raw)
		if err != nil {
			b.Fatal(err)
		}
		req.Selectors = append(req.Selectors, sel)
	}
	st, id, err := s.openStream(context.Background(), benchCaller, req)
	if err != nil {
		b.Fatal(err)
	}
	return st, id
}

// BenchmarkWatchActorStep measures what watch streams cost the broker's
// actor, the one goroutine every lease operation waits for; the streams are
// not served, so no writer competes for the CPU.
//
//   - Open32x100: opening a stream of 32 selectors whose first pages hold
//     100 items each and need a cursor (a Watch call: one actor step and its
//     round trip), then dropping it.
//   - FanOut1000: one change reaching 1,000 streams (an acquire and a
//     release per op, each a step with 1,000 deliveries); ns/delivery is
//     the actor's time per delivery, matching included.
func BenchmarkWatchActorStep(b *testing.B) {
	b.Run("Open32x100", func(b *testing.B) {
		s, _ := benchWatchServer(b, 32, 150)
		sels := make([]string, 32)
		for i := range sels {
			sels[i] = fmt.Sprintf("lease://acme/area-%02d/*", i)
		}
		b.ReportAllocs()
		for b.Loop() {
			_, id := benchOpen(b, s, sels...)
			s.broker.DropStream(id)
		}
	})
	b.Run("FanOut1000", func(b *testing.B) {
		const n, reopen = 1000, 64 // reopen before a queue (1,024) fills
		s, id := benchWatchServer(b, 0, 0)
		ids := make([]core.StreamID, n)
		open := func() {
			for i := range ids {
				if ids[i] != 0 {
					s.broker.DropStream(ids[i])
				}
				_, ids[i] = benchOpen(b, s, "lease://acme/**")
			}
		}
		open()
		ctx := context.Background()
		route := core.Route{Realm: "acme", Area: "renderers", Resource: "doc-1"}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i++; i%reopen == 0 {
				b.StopTimer()
				open()
				b.StartTimer()
			}
			h, err := s.broker.Acquire(ctx, core.AcquireRequest{Family: "acme", Session: id, Route: route, TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.broker.Release(ctx, core.ReleaseRequest{Family: "acme", Session: id, Route: route, Token: h.Token}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(2*n), "ns/delivery")
		st, _ := s.broker.Stats(ctx)
		if st.Overflows != 0 {
			b.Fatalf("%d streams overflowed", st.Overflows)
		}
	})
}
