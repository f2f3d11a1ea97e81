package handlers

import (
	"bytes"
	"encoding/json"
	"reflect"
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
	if _, err := s.CreateSession(now, id, "acme", "worker-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	r, err := core.ParseRoute(route)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(now, "acme", id, r, 30*time.Second, 0); err != nil {
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
	got := delivery{ch, `sub-"7"`}.AppendData(nil)

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
	a := delivery{ch, "sub-1"}.AppendData(nil)
	first := ch.body
	b := delivery{ch, "sub-2"}.AppendData(nil)
	if &ch.body[0] != &first[0] {
		t.Error("the second delivery encoded the change again")
	}
	if !bytes.Equal(a[len(`{"subscription_id":"sub-1"`):], b[len(`{"subscription_id":"sub-2"`):]) {
		t.Errorf("deliveries differ beyond their ids:\n%s\n%s", a, b)
	}
}
