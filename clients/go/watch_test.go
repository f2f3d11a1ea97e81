package muster

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	b := mustStartBroker(t)
	ctx := ctxT(t, 20*time.Second)
	var requests atomic.Int64
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := New(b.url(), WithToken(tokA.Secret), WithHTTPClient(&http.Client{Transport: countingTransport{tr, &requests}}))
	if err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, c, "worker-1", 10*time.Second)
	for i := range 25 {
		if _, err := s.Acquire(ctx, fmt.Sprintf("lease://acme/renderers/doc-%02d", i), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Acquire(ctx, "lease://acme/other/doc-x", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Run("AllPages", func(t *testing.T) {
		requests.Store(0)
		var got []string
		for it, err := range c.List(ctx, "lease://acme/renderers/*", ListOptions{Limit: 10}) {
			if err != nil {
				t.Fatal(err)
			}
			if it.OwnerID != "worker-1" || it.HolderIncarnation != s.HolderIncarnation() {
				t.Fatalf("item %+v", it)
			}
			got = append(got, it.Route)
		}
		if len(got) != 25 || got[0] != "lease://acme/renderers/doc-00" || requests.Load() != 3 {
			t.Fatalf("got %d items in %d requests: %v", len(got), requests.Load(), got)
		}
	})
	t.Run("StopEarly", func(t *testing.T) {
		requests.Store(0)
		n := 0
		for _, err := range c.List(ctx, "lease://acme/**", ListOptions{Limit: 10}) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 12 {
				break
			}
		}
		if requests.Load() != 2 {
			t.Fatalf("%d requests for 12 items at 10 per page", requests.Load())
		}
	})
	t.Run("Exact", func(t *testing.T) {
		p, err := c.ListPage(ctx, "lease://acme/other/doc-x", ListOptions{})
		if err != nil || len(p.Items) != 1 || p.NextCursor != "" || p.Epoch == "" {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("ErrInvalidSelector", func(t *testing.T) {
		for _, err := range c.List(ctx, "lease://acme/renderers/doc*", ListOptions{}) {
			if !errors.Is(err, ErrInvalidSelector) {
				t.Fatalf("got %v", err)
			}
		}
	})
	t.Run("ErrInvalidCursor", func(t *testing.T) {
		p, err := c.ListPage(ctx, "lease://acme/renderers/*", ListOptions{Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ListPage(ctx, "lease://acme/*/*", ListOptions{Cursor: p.NextCursor})
		if !errors.Is(err, ErrInvalidCursor) {
			t.Fatalf("cursor of another selector: %v", err)
		}
	})
	t.Run("ErrForbidden", func(t *testing.T) {
		narrow := newClient(t, b.url(), "narrow")
		for _, err := range narrow.List(ctx, "lease://acme/*/*", ListOptions{}) {
			if !errors.Is(err, ErrForbidden) {
				t.Fatalf("got %v", err)
			}
		}
	})
}

type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func TestWatch(t *testing.T) {
	b := mustStartBroker(t)
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, b.url(), "a")
	s := mustSession(t, c, "worker-1", 10*time.Second)
	held, err := s.Acquire(ctx, "lease://acme/renderers/doc-0", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	sub, err := c.Watch(ctx, "lease://acme/renderers/*", "lease://acme/**")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	m := sub.Marker()
	if len(m.Selectors) != 2 || m.Selectors[0].Selector != "lease://acme/renderers/*" ||
		len(m.Selectors[0].Items) != 1 || m.Selectors[0].Items[0].Route != held.Route() || m.Epoch == "" {
		t.Fatalf("marker %+v", m)
	}
	l, err := s.Acquire(ctx, "lease://acme/renderers/doc-1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// One change per matching registration, in revision order.
	want := []struct {
		sel  string
		kind ChangeKind
	}{
		{"lease://acme/renderers/*", Acquired}, {"lease://acme/**", Acquired},
		{"lease://acme/renderers/*", Released}, {"lease://acme/**", Released},
	}
	var last int64
	for i, w := range want {
		select {
		case ch := <-sub.Events():
			if ch.Kind != w.kind || ch.Route != l.Route() || ch.Revision <= m.Revision || ch.Revision < last {
				t.Fatalf("change %d: %+v", i, ch)
			}
			if ch.Kind == Acquired && (ch.Item.OwnerID != "worker-1" || ch.Item.Route != l.Route()) {
				t.Fatalf("acquired without its holder: %+v", ch)
			}
			if ch.Selector != w.sel && ch.Selector != want[i^1].sel {
				t.Fatalf("change %d for selector %q", i, ch.Selector)
			}
			last = ch.Revision
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d did not arrive", i)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.Events(); ok || !errors.Is(sub.Err(), ErrClosed) {
		t.Fatalf("after close: %v", sub.Err())
	}

	t.Run("SessionStreamUnsubscribe", func(t *testing.T) {
		sub, err := s.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := sub.Unsubscribe(ctx, "lease://acme/renderers/*"); err != nil {
			t.Fatal(err)
		}
		waitEnd(t, sub, ErrUnsubscribed)
	})
	t.Run("Superseded", func(t *testing.T) {
		first, err := s.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		second, err := s.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		waitEnd(t, first, ErrSuperseded)
	})
	t.Run("SessionClosed", func(t *testing.T) {
		s2 := mustSession(t, c, "worker-2", 10*time.Second)
		sub, err := s2.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := s2.Close(ctx); err != nil {
			t.Fatal(err)
		}
		waitEnd(t, sub, ErrStreamSessionClosed)
	})
	t.Run("UnsubscribeNeedsASession", func(t *testing.T) {
		sub, err := c.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := sub.Unsubscribe(ctx, "lease://acme/renderers/*"); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("Errors", func(t *testing.T) {
		if _, err := c.Watch(ctx, "lease://acme/doc*/x"); !errors.Is(err, ErrInvalidSelector) {
			t.Fatalf("bad selector: %v", err)
		}
		if _, err := newClient(t, b.url(), "narrow").Watch(ctx, "lease://acme/*/*"); !errors.Is(err, ErrForbidden) {
			t.Fatalf("forbidden: %v", err)
		}
		if _, err := c.Watch(ctx); !errors.Is(err, ErrInvalidSelector) {
			t.Fatalf("no selector: %v", err)
		}
	})
	t.Run("BrokerRestartEndsTheStream", func(t *testing.T) {
		sub, err := c.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		epoch := sub.Marker().Epoch
		b.restart(t)
		waitEnd(t, sub, ErrStreamEnded)
		sub2, err := c.Watch(ctx, "lease://acme/renderers/*")
		if err != nil {
			t.Fatal(err)
		}
		defer sub2.Close()
		if m := sub2.Marker(); m.Epoch == epoch || len(m.Selectors[0].Items) != 0 {
			t.Fatalf("after restart: %+v (old epoch %s)", m, epoch)
		}
	})
}

func waitEnd(tb testing.TB, sub *Subscription, want error) {
	tb.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				if !errors.Is(sub.Err(), want) {
					tb.Fatalf("stream ended with %v, want %v", sub.Err(), want)
				}
				return
			}
		case <-timeout:
			tb.Fatalf("the stream did not end (want %v)", want)
		}
	}
}

// fakeSSE serves a fixed event stream on /v1/leases/watch and 200 pages on
// /v1/leases.
func fakeSSE(tb testing.TB, stream string) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(stream))
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func TestWatchFirstEventMustBeTheMarker(t *testing.T) {
	srv := fakeSSE(t, "event: change\nid: 1\ndata: {}\n\n")
	c := newClient(t, srv.URL, "")
	if _, err := c.Watch(ctxT(t, 5*time.Second), "lease://a/b/*"); err == nil {
		t.Fatal("a stream without a marker was accepted")
	}
	srv = fakeSSE(t, "event: shutdown\ndata: {\"reason\":\"shutdown\"}\n\n")
	c = newClient(t, srv.URL, "")
	if _, err := c.Watch(ctxT(t, 5*time.Second), "lease://a/b/*"); !errors.Is(err, ErrShutdown) {
		t.Fatalf("got %v", err)
	}
}
