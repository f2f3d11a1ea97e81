package sse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeadlineBetweenWrites: over HTTP/2 the write deadline is cleared
// after every flush (a pending one would reset the stream); over HTTP/1 it
// stays set between writes, and is cleared once the stream has idled for a
// heartbeat and when Serve returns.
func TestDeadlineBetweenWrites(t *testing.T) {
	for _, c := range []struct {
		name  string
		major int
		set   bool // set between two changes
	}{{"HTTP1", 1, true}, {"HTTP2", 2, false}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := NewStream(8)
				fw := newFakeWriter()
				ctx, cancel := context.WithCancel(context.Background())
				r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/leases/watch", nil)
				r.ProtoMajor = c.major
				errc := make(chan error, 1)
				go func() { errc <- Serve(fw, r, s, withPool(Options{})) }()
				deadlineSet := func() bool {
					synctest.Wait()
					fw.mu.Lock()
					defer fw.mu.Unlock()
					return !fw.deadline.IsZero()
				}

				time.Sleep(time.Second)
				s.Offer(Event{Name: "change", ID: "1", Data: []byte("{}")})
				if got := deadlineSet(); got != c.set {
					t.Errorf("deadline set after a change: %v, want %v", got, c.set)
				}
				time.Sleep(20 * time.Second) // a keepalive at 16 s
				if deadlineSet() {
					t.Error("deadline set after a keepalive")
				}
				s.Offer(Event{Name: "change", ID: "2", Data: []byte("{}")})
				deadlineSet()
				cancel()
				<-errc
				if deadlineSet() {
					t.Error("deadline set after Serve returned")
				}
				fw.check(t, []string{
					"0s retry: 2000\n\n",
					"1s event: change\nid: 1\ndata: {}\n\n",
					"16s : keepalive\n\n",
					"21s event: change\nid: 2\ndata: {}\n\n",
				})
			})
		})
	}
}

// TestIdleLongerThanWriteTimeout: a stream idle for longer than the write
// timeout (its deadline, if left set, has passed) still delivers the next
// event, on every protocol.
func TestIdleLongerThanWriteTimeout(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(8)
			url, client, errc := mustServe(t, p, s, Options{WriteTimeout: 20 * time.Millisecond, Heartbeat: time.Hour})
			resp := mustOpen(t, context.Background(), client, url)
			dec := NewDecoder(resp.Body)
			for i, id := range []string{"1", "2", "3"} {
				if i > 0 {
					time.Sleep(60 * time.Millisecond)
				}
				s.Offer(ev("change", id))
				got, err := dec.Next()
				if err != nil || got.ID != id {
					t.Fatalf("event %s: got %+v, %v", id, got, err)
				}
			}
			s.End(ev("shutdown", ""))
			if got := readAll(t, dec); len(got) != 1 || got[0].Name != "shutdown" {
				t.Errorf("events %s, want the terminal only", formatEvents(got))
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
}
