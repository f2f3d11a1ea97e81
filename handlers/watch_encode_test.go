package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/sse"
)

// changeOf returns the acquisition event of route in a fresh state, and
// the step's time.
func changeOf(t *testing.T, route string) (core.Event, time.Time) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	s := core.NewState(core.Config{Epoch: "e", IncarnationKey: []byte("k")})
	var id core.SessionID
	id[0] = 1
	if _, err := s.CreateSession(now, core.SessionRequest{Family: "acme", ID: id, OwnerID: "worker-1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	r, err := core.ParseRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(now, core.AcquireRequest{Family: "acme", Session: id, Route: r, TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ev := s.TakeEvents()
	if len(ev) != 1 {
		t.Fatalf("%d events", len(ev))
	}
	return ev[0], now.Add(1500 * time.Millisecond)
}

// The change the streams receive is the contract's ChangeEvent: its JSON
// decodes into api.ChangeEvent with no unknown field and equals the JSON of
// the api.ChangeEvent built from the same change. This ties changeWire to
// the generated type.
func TestChangeEncodingIsTheContractsType(t *testing.T) {
	e, at := changeOf(t, "lease://acme/renderers/doc-1")
	ch := &change{ev: e, at: at, id: "1"}
	got := ch.delivery(`sub-"7"`).AppendData(nil)

	var decoded api.ChangeEvent
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&decoded); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	item := itemBody(e.Item, at)
	want, _ := json.Marshal(api.ChangeEvent{SubscriptionId: `sub-"7"`, Route: "lease://acme/renderers/doc-1", Kind: api.ChangeKind("acquired"), Revision: 1, Item: &item})
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("change:\n got %s\nwant %s", got, want)
	}
	if item.RemainingMs != 28500 {
		t.Errorf("remaining_ms = %d, want 28500 (measured at the step's time)", item.RemainingMs)
	}
}

// The actor's part of a delivery is an enqueue: the sink encodes nothing;
// the first writer encodes the change once and every delivery shares it.
func TestChangeEncodedOnceOffTheActor(t *testing.T) {
	e, at := changeOf(t, "lease://acme/renderers/doc-1")
	m := NewMetrics(nil)
	c := &core.Change{Event: &e, Time: at}
	streams := []*sse.Stream{sse.NewStream(4), sse.NewStream(4)}
	for i, st := range streams {
		if !(&streamSink{metrics: m, stream: st}).Change(c, "sub-"+string(rune('1'+i))) {
			t.Fatal("offer refused")
		}
	}
	ch, _ := c.Shared.(*change)
	if ch == nil {
		t.Fatal("the deliveries do not share a change")
	}
	if ch.body != nil {
		t.Fatal("the change was encoded on the actor")
	}
	a := ch.delivery("sub-1").AppendData(nil)
	first := ch.body
	b := ch.delivery("sub-2").AppendData(nil)
	if &ch.body[0] != &first[0] {
		t.Error("the second delivery encoded the change again")
	}
	if !bytes.Equal(a[len(`{"subscription_id":"sub-1"`):], b[len(`{"subscription_id":"sub-2"`):]) {
		t.Errorf("deliveries differ beyond their ids:\n%s\n%s", a, b)
	}
}

// Streams served while the actor fans out: the marker, every change (with
// the shared body encoded by whichever writer comes first) and the terminal
// event reach each stream intact and in order. Under -race this is the
// check that handing typed values to the writers races with nothing.
func TestWatchStreamsEncodeOnTheirWriters(t *testing.T) {
	const streams, changes = 4, 20
	br := core.NewBroker(core.Config{Epoch: "e", IncarnationKey: []byte("k")}, core.SystemClock{}, nil)
	defer br.Close()
	s := &Server{broker: br, clock: core.SystemClock{}, metrics: NewMetrics(br), cursors: core.NewCursorCodec([]byte("master"), br.Epoch())}
	ctx := context.Background()
	var watcher, holder core.SessionID
	watcher[0], holder[0] = 1, 2
	for _, id := range []core.SessionID{watcher, holder} {
		if _, err := br.CreateSession(ctx, core.SessionRequest{Family: "acme", ID: id, OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	caller := &Caller{Name: "t", Family: "acme"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sel, _ := core.ParseSelector(r.URL.Query().Get("selector"))
		req := core.WatchRequest{SubscribeRequest: core.SubscribeRequest{Family: "acme", Session: &watcher, Selectors: []core.Selector{sel}, Caller: "t"}}
		stream, id, err := s.openStream(r.Context(), caller, req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer br.DropStream(id)
		_ = sse.Serve(w, r, stream, sse.Options{})
	}))
	defer srv.Close()

	decs := make([]*sse.Decoder, streams)
	for i := range decs {
		// One selector per stream, all matching: lease://acme/**, lease://acme/r/*, …
		sel := []string{"lease://acme/**", "lease://acme/r/*", "lease://acme/*/*", "lease://*/r/*"}[i]
		resp, err := http.Get(srv.URL + "?selector=" + url.QueryEscape(sel))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		decs[i] = sse.NewDecoder(resp.Body)
		if ev, err := decs[i].Next(); err != nil || ev.Name != "snapshot" {
			t.Fatalf("stream %d: first event %q, %v", i, ev.Name, err)
		}
	}
	route := core.Route{Realm: "acme", Area: "r", Resource: "x"}
	for range changes / 2 {
		h, err := br.Acquire(ctx, core.AcquireRequest{Family: "acme", Session: holder, Route: route, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Release(ctx, core.ReleaseRequest{Family: "acme", Session: holder, Route: route, Token: h.Token}); err != nil {
			t.Fatal(err)
		}
	}
	if err := br.EndSession(ctx, "acme", watcher); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i, dec := range decs {
		var got []string
		for {
			ev, err := dec.Next()
			if err != nil {
				t.Fatalf("stream %d after %d events: %v", i, len(got), err)
			}
			if ev.Name != "change" {
				if ev.Name != "session_closed" || !strings.Contains(string(ev.Data), `"revision":`) {
					t.Errorf("stream %d ends with %s %s", i, ev.Name, ev.Data)
				}
				break
			}
			var c api.ChangeEvent
			if err := json.Unmarshal(ev.Data, &c); err != nil || ev.ID != fmt.Sprint(c.Revision) {
				t.Fatalf("stream %d: change %s id %s: %v", i, ev.Data, ev.ID, err)
			}
			c.SubscriptionId = ""
			b, _ := json.Marshal(c)
			got = append(got, string(b))
		}
		if len(got) != changes {
			t.Fatalf("stream %d: %d changes, want %d", i, len(got), changes)
		}
		if i == 0 {
			bodies = got
		} else if !slices.Equal(got, bodies) {
			t.Errorf("stream %d saw other changes than stream 0:\n%q\n%q", i, got, bodies)
		}
	}
}
