package sse

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	r3 "github.com/r3labs/sse/v2"
)

// script is the stream every delivery test sends: a snapshot marker queued
// before the client connects, change events (one with a multi-line payload,
// one with CR LF) and a terminal event.
func script(changes int) (snapshot Event, evs []Event, final Event) {
	snapshot = Event{Name: "snapshot", Data: []byte(`{"epoch":"e1","revision":7,"subscriptions":[]}`)}
	for i := range changes {
		rev := strconv.Itoa(8 + i)
		data := `{"subscription_id":"s1","route":"lease://acme/renderers/doc-` + rev + `","kind":"acquired","revision":` + rev + `}`
		switch i {
		case 3:
			data = "{\n  \"pretty\": true\n}"
		case 4:
			data = "a\r\nb"
		}
		evs = append(evs, Event{Name: "change", ID: rev, Data: []byte(data)})
	}
	final = Event{Name: "unsubscribed", Data: []byte(`{"selector":"lease://acme/**"}`)}
	return snapshot, evs, final
}

// offerScript queues the snapshot now; the changes and the terminal event
// follow from another goroutine once the client has read the snapshot, so
// they travel through the live loop rather than the first batch.
func offerScript(t *testing.T, s *Stream, changes int) (want []Event, afterFirst func()) {
	snapshot, evs, final := script(changes)
	if !s.Offer(snapshot) {
		t.Fatal("snapshot refused")
	}
	want = append([]Event{snapshot}, evs...)
	want = append(want, final)
	for i := range want {
		want[i] = normalize(want[i])
	}
	return want, func() {
		go func() {
			for _, ev := range evs {
				if !s.Offer(ev) {
					t.Errorf("offer %s refused", ev.ID)
				}
			}
			s.End(final)
		}()
	}
}

func TestServeDecoder(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(DefaultCapacity)
			want, afterFirst := offerScript(t, s, 200)
			url, client, errc := mustServe(t, p, s, Options{Retry: 1500 * time.Millisecond})

			resp := mustOpen(t, context.Background(), client, url)
			dec := NewDecoder(resp.Body)
			first, err := dec.Next()
			if err != nil {
				t.Fatal(err)
			}
			if retry, ok := dec.Retry(); !ok || retry != 1500*time.Millisecond {
				t.Errorf("retry = %v, %v; want 1.5s before the first event", retry, ok)
			}
			afterFirst()
			got := append([]Event{first}, readAll(t, dec)...)
			if !equalEvents(got, want) {
				t.Errorf("events:\n got %s\nwant %s", formatEvents(got), formatEvents(want))
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v, want nil after the terminal event", err)
			}
			if s.Offer(ev("change", "late")) {
				t.Error("Offer accepted after the stream ended")
			}
		})
	}
}

// TestServeR3labs reads the same stream with an independent SSE client.
func TestServeR3labs(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(DefaultCapacity)
			want, afterFirst := offerScript(t, s, 200)
			url, client, errc := mustServe(t, p, s, Options{})

			c := r3.NewClient(url)
			c.Connection = client
			var got []*r3.Event
			var retry string
			err := c.SubscribeWithContext(context.Background(), "", func(msg *r3.Event) {
				if len(msg.Event) == 0 && len(msg.Data) == 0 && len(msg.Retry) > 0 {
					retry = string(msg.Retry) // the retry block carries no event
					return
				}
				got = append(got, msg)
				if len(got) == 1 {
					afterFirst()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if retry != "2000" {
				t.Errorf("retry = %q, want the default 2000", retry)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d events, want %d", len(got), len(want))
			}
			lastID := ""
			for i, w := range want {
				if w.ID != "" {
					lastID = w.ID // r3labs reports the last event ID
				}
				g := got[i]
				if string(g.Event) != w.Name || string(g.ID) != lastID || !bytes.Equal(g.Data, w.Data) {
					t.Errorf("event %d: got {%q %q %q}, want {%q %q %q}", i, g.Event, g.ID, g.Data, w.Name, lastID, w.Data)
				}
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
}

// TestServeOverflow fills the queue before the client connects: the client
// gets everything queued, the overflow event, and the end of the stream.
func TestServeOverflow(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			const capacity = 16
			s := NewStream(capacity)
			var want []Event
			for i := range capacity {
				e := ev("change", strconv.Itoa(i))
				want = append(want, e)
				if !s.Offer(e) {
					t.Fatalf("offer %d refused", i)
				}
			}
			if s.Offer(ev("change", "lost")) {
				t.Fatal("offer into a full queue accepted")
			}
			s.End(ev("shutdown", "")) // too late: overflow is the terminal
			var overflows atomic.Int32
			url, client, errc := mustServe(t, p, s, Options{OnOverflow: func() { overflows.Add(1) }})

			resp := mustOpen(t, context.Background(), client, url)
			got := readAll(t, NewDecoder(resp.Body))
			want = append(want, Event{Name: "overflow", Data: []byte("{}")})
			if !equalEvents(got, want) {
				t.Errorf("events:\n got %s\nwant %s", formatEvents(got), formatEvents(want))
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v", err)
			}
			if n := overflows.Load(); n != 1 {
				t.Errorf("OnOverflow called %d times, want 1", n)
			}
		})
	}
}

// TestServeHeartbeat waits for keepalive comments on an idle stream, then
// checks that End still goes through.
func TestServeHeartbeat(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(8)
			url, client, errc := mustServe(t, p, s, Options{Heartbeat: 5 * time.Millisecond})
			resp := mustOpen(t, context.Background(), client, url)

			const want = 3
			beats := make(chan struct{}, want)
			dec := NewDecoder(resp.Body)
			dec.OnComment = func(text []byte) {
				if string(text) != " keepalive" {
					t.Errorf("comment %q", text)
				}
				select {
				case beats <- struct{}{}:
				default:
					s.End(ev("session_closed", ""))
				}
			}
			got := readAll(t, dec)
			if len(got) != 1 || got[0].Name != "session_closed" {
				t.Errorf("events %s, want the terminal only", formatEvents(got))
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
}

// TestServeLargeEvent sends events larger than one write chunk.
func TestServeLargeEvent(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(8)
			big := Event{Name: "snapshot", Data: bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16)}
			want := []Event{big, ev("change", "1"), big, ev("shutdown", "")}
			for _, e := range want[:3] {
				s.Offer(e)
			}
			s.End(want[3])
			url, client, errc := mustServe(t, p, s, Options{})
			resp := mustOpen(t, context.Background(), client, url)
			if got := readAll(t, NewDecoder(resp.Body)); !equalEvents(got, want) {
				t.Errorf("got %d events, want %d intact", len(got), len(want))
			}
			if err := wait(t, errc, "Serve"); err != nil {
				t.Errorf("Serve = %v", err)
			}
		})
	}
}

// TestServeClientGone cancels the request: the writer returns the context
// error, Done closes and offers are refused.
func TestServeClientGone(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(8)
			s.Offer(ev("snapshot", ""))
			url, client, errc := mustServe(t, p, s, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			resp := mustOpen(t, ctx, client, url)
			if _, err := NewDecoder(resp.Body).Next(); err != nil {
				t.Fatal(err)
			}
			cancel()
			err := wait(t, errc, "Serve")
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Serve = %v, want context.Canceled", err)
			}
			waitDone(t, s)
			if s.Offer(ev("change", "1")) {
				t.Error("Offer accepted after the client went away")
			}
		})
	}
}

func TestServeTwice(t *testing.T) {
	s := NewStream(8)
	s.End(ev("shutdown", ""))
	url, client, errc := mustServe(t, protos[0], s, Options{})
	resp := mustOpen(t, context.Background(), client, url)
	readAll(t, NewDecoder(resp.Body))
	if err := wait(t, errc, "Serve"); err != nil {
		t.Fatal(err)
	}
	if err := Serve(nil, nil, s, Options{}); !errors.Is(err, ErrServed) {
		t.Errorf("second Serve = %v, want ErrServed", err)
	}
}

// noDeadlines is a ResponseWriter that hides the connection's deadlines,
// like a middleware wrapper without Unwrap.
type noDeadlines struct{ w http.ResponseWriter }

func (n noDeadlines) Header() http.Header         { return n.w.Header() }
func (n noDeadlines) Write(p []byte) (int, error) { return n.w.Write(p) }
func (n noDeadlines) WriteHeader(code int)        { n.w.WriteHeader(code) }

// TestServeNeedsDeadlines: without write deadlines Serve refuses before
// writing, and the handler can still answer with an error.
func TestServeNeedsDeadlines(t *testing.T) {
	s := NewStream(8)
	srv, client := startHTTP1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Serve(noDeadlines{w}, r, s, withPool(Options{})); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "deadline") {
		t.Errorf("got %d %q, want 500 about deadlines", resp.StatusCode, body)
	}
	waitDone(t, s)
}

// TestOfferNeverBlocksOnStalledClient stalls the writer in a connection
// write, on a client that never reads, with a write timeout far beyond the
// test, and shows that offers keep returning at once meanwhile: the queue
// fills, overflows, and every later offer is refused.
func TestOfferNeverBlocksOnStalledClient(t *testing.T) {
	s := NewStream(DefaultCapacity)
	errc := make(chan error, 1)
	srv, writes := startStallServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errc <- Serve(w, r, s, withPool(Options{WriteTimeout: time.Hour}))
	}))
	conn := dialStalled(t, srv.Listener.Addr().String(), "/watch")

	// 2 MiB is far more than the socket buffers hold: the writer blocks.
	payload := bytes.Repeat([]byte("x"), 16<<10)
	for i := range 128 {
		if !s.Offer(Event{Name: "change", ID: strconv.Itoa(i), Data: payload}) {
			t.Fatalf("offer %d refused", i)
		}
	}
	var stuckSince time.Time
	for {
		var ok bool
		if stuckSince, ok = writes.stalled(50 * time.Millisecond); ok {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not a guess
	}

	var slowest time.Duration
	accepted := 0
	for ; accepted <= DefaultCapacity; accepted++ {
		start := time.Now()
		ok := s.Offer(Event{Name: "change", ID: "more", Data: payload})
		slowest = max(slowest, time.Since(start))
		if !ok {
			break
		}
	}
	if accepted > DefaultCapacity {
		t.Fatal("the queue never overflowed")
	}
	start := time.Now()
	for range 10000 {
		if s.Offer(ev("change", "refused")) {
			t.Fatal("Offer accepted after overflow")
		}
	}
	s.End(ev("shutdown", ""))
	refused := time.Since(start)
	if since, ok := writes.stalled(0); !ok || !since.Equal(stuckSince) {
		t.Fatal("the writer's write completed: the client was not stalled")
	}
	select {
	case <-s.Done():
		t.Fatal("the writer returned although its client is stalled and the write timeout is an hour")
	default:
	}
	t.Logf("while the writer was blocked: %d offers accepted, then overflow; slowest offer %v; 10000 refused offers and End in %v",
		accepted, slowest, refused)
	if slowest > time.Second {
		t.Errorf("an offer took %v", slowest)
	}

	conn.Close() // now the stuck write fails
	if err := wait(t, errc, "Serve"); err == nil {
		t.Error("Serve = nil, want the write error")
	}
}

// TestWriteTimeoutEndsStalledWriter: a client that never reads is cut off by
// the per-write deadline.
func TestWriteTimeoutEndsStalledWriter(t *testing.T) {
	s := NewStream(64)
	errc := make(chan error, 1)
	srv, _ := startStallServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errc <- Serve(w, r, s, withPool(Options{WriteTimeout: 100 * time.Millisecond}))
	}))
	dialStalled(t, srv.Listener.Addr().String(), "/watch")

	payload := bytes.Repeat([]byte("x"), 16<<10)
	for i := 0; s.Offer(Event{Name: "change", ID: strconv.Itoa(i), Data: payload}); i++ {
	}
	err := wait(t, errc, "Serve")
	if !isTimeout(err) {
		t.Errorf("Serve = %v, want a deadline error", err)
	}
	waitDone(t, s)
}

// TestWriteTimeoutHTTP2 stalls an HTTP/2 stream: the client never reads the
// body, flow control stops the writer, and the write deadline resets the
// stream.
func TestWriteTimeoutHTTP2(t *testing.T) {
	for _, p := range protos[1:] {
		t.Run(p.name, func(t *testing.T) {
			s := NewStream(4)
			url, client, errc := mustServe(t, p, s, Options{WriteTimeout: 100 * time.Millisecond})
			mustOpen(t, context.Background(), client, url) // its body is never read
			payload := bytes.Repeat([]byte("x"), 1<<20)
			for i := 0; s.Offer(Event{Name: "change", ID: strconv.Itoa(i), Data: payload}); i++ {
				if i > 1000 {
					t.Fatal("the stream never stalled")
				}
			}
			if err := wait(t, errc, "Serve"); err == nil {
				t.Error("Serve = nil, want a write error")
			}
			waitDone(t, s)
		})
	}
}

// TestServeWire pins the exact bytes of a short stream.
func TestServeWire(t *testing.T) {
	s := NewStream(8)
	s.Offer(Event{Name: "snapshot", Data: []byte(`{"revision":41}`)})
	s.Offer(Event{Name: "change", ID: "42", Data: []byte(`{"kind":"acquired"}`)})
	s.End(Event{Name: "shutdown", Data: []byte(`{}`)})
	url, client, errc := mustServe(t, protos[0], s, Options{})
	resp := mustOpen(t, context.Background(), client, url)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "retry: 2000\n\n" +
		"event: snapshot\ndata: {\"revision\":41}\n\n" +
		"event: change\nid: 42\ndata: {\"kind\":\"acquired\"}\n\n" +
		"event: shutdown\ndata: {}\n\n"
	if string(body) != want {
		t.Errorf("wire:\n%s\nwant:\n%s", body, want)
	}
	if err := wait(t, errc, "Serve"); err != nil {
		t.Error(err)
	}
}
