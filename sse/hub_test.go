package sse

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

var shutdownEvent = Event{Name: "shutdown", Data: []byte(`{"reason":"server shutting down"}`)}

// watchHandler serves a new stream through hub, with a snapshot marker
// queued first, the way the broker's watch handler does.
func watchHandler(hub *Hub) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := NewStream(8)
		s.Offer(Event{Name: "snapshot", Data: []byte("{}")})
		_ = hub.Serve(w, r, s, withPool(Options{}))
	}
}

// TestHubShutdown drains open streams, over HTTP/1.1 and HTTP/2, from
// http.Server.RegisterOnShutdown: every client gets the shutdown event and
// a clean end, and Shutdown returns without hitting its deadline.
func TestHubShutdown(t *testing.T) {
	var hub Hub
	srv := httptest.NewUnstartedServer(watchHandler(&hub))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	ended := make(chan error, 1)
	srv.Config.RegisterOnShutdown(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ended <- hub.EndAll(ctx, shutdownEvent)
	})
	srv.Start()
	dials := mustTrackDials(t, srv)

	h1 := &http.Transport{DialContext: dials.dial}
	h2 := h2cTransport(dials)
	var decs []*Decoder
	for _, tr := range []*http.Transport{h1, h1, h2, h2} {
		resp := mustOpen(t, context.Background(), &http.Client{Transport: tr}, srv.URL)
		dec := NewDecoder(resp.Body)
		if ev, err := dec.Next(); err != nil || ev.Name != "snapshot" {
			t.Fatalf("first event %v, %v", ev, err)
		}
		decs = append(decs, dec)
	}
	if n := hub.Len(); n != 4 {
		t.Fatalf("hub tracks %d streams, want 4", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Config.Shutdown(ctx) }()
	for i, dec := range decs {
		if got := readAll(t, dec); !equalEvents(got, []Event{shutdownEvent}) {
			t.Errorf("stream %d: %s, want the shutdown event", i, formatEvents(got))
		}
	}
	if err := wait(t, ended, "EndAll"); err != nil {
		t.Errorf("EndAll = %v", err)
	}
	if err := wait(t, shut, "Shutdown"); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n := hub.Len(); n != 0 {
		t.Errorf("hub still tracks %d streams", n)
	}
}

// TestHubLateStream: a stream that starts after EndAll gets what is queued
// and the shutdown event at once.
func TestHubLateStream(t *testing.T) {
	var hub Hub
	if err := hub.EndAll(context.Background(), shutdownEvent); err != nil {
		t.Fatal(err)
	}
	hub.EndAll(context.Background(), Event{Name: "other"}) // the first event stays
	srv, client := startHTTP1(t, watchHandler(&hub))
	resp := mustOpen(t, context.Background(), client, srv.URL)
	want := []Event{{Name: "snapshot", Data: []byte("{}")}, shutdownEvent}
	if got := readAll(t, NewDecoder(resp.Body)); !equalEvents(got, want) {
		t.Errorf("got %s, want %s", formatEvents(got), formatEvents(want))
	}
}

// TestHubEndAllBounded: EndAll gives up at its context's deadline when a
// writer is stuck on a client that does not read.
func TestHubEndAllBounded(t *testing.T) {
	var hub Hub
	s := NewStream(4)
	errc := make(chan error, 1)
	srv, writes := startStallServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errc <- hub.Serve(w, r, s, withPool(Options{WriteTimeout: time.Hour}))
	}))
	conn := dialStalled(t, srv.Listener.Addr().String(), "/watch")
	payload := make([]byte, 1<<20)
	for s.Offer(Event{Name: "change", Data: payload}) {
	}
	for _, stuck := writes.stalled(20 * time.Millisecond); !stuck; _, stuck = writes.stalled(20 * time.Millisecond) {
		time.Sleep(5 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := hub.EndAll(ctx, shutdownEvent); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("EndAll = %v, want context.DeadlineExceeded", err)
	}
	conn.Close()
	if err := wait(t, errc, "Serve"); err == nil {
		t.Error("Serve = nil, want the write error")
	}
	if err := hub.EndAll(context.Background(), shutdownEvent); err != nil {
		t.Errorf("EndAll after the writer returned = %v", err)
	}
}
