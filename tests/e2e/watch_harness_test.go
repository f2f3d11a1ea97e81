package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/musterhq/muster/sse"
)

// watchStream is one open SSE stream read by the project's own decoder.
type watchStream struct {
	resp   *http.Response
	events chan sse.Event
	err    chan error
	cancel context.CancelFunc
}

type watchOpts struct {
	token, session string
	queryToken     bool
	client         *http.Client
}

func watchURL(base string, selectors []string, token string) string {
	q := url.Values{"selector": selectors}
	if token != "" {
		q.Set("access_token", token)
	}
	return base + "/v1/leases/watch?" + q.Encode()
}

// openWatch opens a stream and fails the test unless it answers 200.
func (b *Broker) openWatch(tb testing.TB, o watchOpts, selectors ...string) *watchStream {
	tb.Helper()
	ws, resp := b.tryWatch(tb, o, selectors...)
	if ws == nil {
		tb.Fatalf("open watch: %d %s", resp.Status, resp.Body)
	}
	return ws
}

// tryWatch opens a stream; on a non-200 answer it returns the problem.
func (b *Broker) tryWatch(tb testing.TB, o watchOpts, selectors ...string) (*watchStream, *Response) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	qt := ""
	if o.queryToken {
		qt = o.token
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", watchURL(b.URL(), selectors, qt), nil)
	req.Header.Set("Accept", "text/event-stream")
	if o.token != "" && !o.queryToken {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	if o.session != "" {
		req.Header.Set("Muster-Session", o.session)
	}
	c := o.client
	if c == nil {
		c = &http.Client{}
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		tb.Fatalf("open watch: %v", err)
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		defer cancel()
		data, _ := io.ReadAll(resp.Body)
		r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
		validateResponse(tb, req, r)
		return nil, r
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		tb.Fatalf("content-type %q", ct)
	}
	ws := &watchStream{resp: resp, events: make(chan sse.Event, 1<<16), err: make(chan error, 1), cancel: cancel}
	go func() {
		d := sse.NewDecoder(resp.Body)
		for {
			ev, err := d.Next()
			if err != nil {
				ws.err <- err
				close(ws.events)
				return
			}
			ws.events <- ev
		}
	}()
	tb.Cleanup(ws.close)
	return ws, nil
}

func (ws *watchStream) close() {
	ws.cancel()
	ws.resp.Body.Close()
}

// next returns the next event or fails after timeout.
func (ws *watchStream) next(tb testing.TB, timeout time.Duration) sse.Event {
	tb.Helper()
	select {
	case ev, ok := <-ws.events:
		if !ok {
			tb.Fatalf("stream ended: %v", <-ws.err)
		}
		return ev
	case <-time.After(timeout):
		tb.Fatal("no event within timeout")
	}
	return sse.Event{}
}

// ended waits for the stream to close and reports how it closed.
func (ws *watchStream) ended(tb testing.TB, timeout time.Duration) error {
	tb.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-ws.events:
			if !ok {
				return <-ws.err
			}
		case <-deadline:
			tb.Fatal("stream did not end")
		}
	}
}

type markerBody struct {
	Epoch         string `json:"epoch"`
	Revision      int64  `json:"revision"`
	Subscriptions []struct {
		ID         string     `json:"id"`
		Selector   string     `json:"selector"`
		Items      []itemBody `json:"items"`
		NextCursor *string    `json:"next_cursor"`
	} `json:"subscriptions"`
}

type changeBody struct {
	SubscriptionID string    `json:"subscription_id"`
	Route          string    `json:"route"`
	Kind           string    `json:"kind"`
	Revision       int64     `json:"revision"`
	Item           *itemBody `json:"item"`
}

func (ws *watchStream) marker(tb testing.TB) markerBody {
	tb.Helper()
	ev := ws.next(tb, 5*time.Second)
	if ev.Name != "snapshot" {
		tb.Fatalf("first event %q, want snapshot", ev.Name)
	}
	var m markerBody
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func (ws *watchStream) change(tb testing.TB) changeBody {
	tb.Helper()
	ev := ws.next(tb, 5*time.Second)
	if ev.Name != "change" {
		tb.Fatalf("event %q (%s), want change", ev.Name, ev.Data)
	}
	var c changeBody
	if err := json.Unmarshal(ev.Data, &c); err != nil {
		tb.Fatal(err)
	}
	if ev.ID == "" {
		tb.Fatal("a change without an SSE id")
	}
	return c
}

// quiet asserts no event arrives within d.
func (ws *watchStream) quiet(tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case ev, ok := <-ws.events:
		if ok {
			tb.Fatalf("unexpected event %q %s", ev.Name, ev.Data)
		}
	case <-time.After(d):
	}
}
