package handlers

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/sse"
)

// StreamQueue is the bounded queue of every watch stream: a stream whose
// reader falls this many events behind ends with `event: overflow`.
const StreamQueue = sse.DefaultCapacity

// watch serves GET /v1/leases/watch as a hand-written SSE stream (design
// §7): every selector is validated and authorized before anything is
// retained; then, in one actor step, the selectors are registered, the
// snapshot is taken and the marker is queued first.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, params api.WatchLeasesParams) {
	ctx := r.Context()
	c := callerFrom(ctx)
	sels := make([]core.Selector, 0, len(params.Selector))
	for _, raw := range params.Selector {
		sel, err := authorizeSelector(ctx, raw, core.Read)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sels = append(sels, sel)
	}
	req := core.WatchRequest{Family: c.Family, Selectors: sels, Caller: snapshotOwner(c)}
	if params.MusterSession != nil {
		id, err := core.ParseSessionID(*params.MusterSession)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		req.Session = &id
	}
	if r.Method == http.MethodHead {
		// HEAD answers what GET would start with, and opens nothing.
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return
	}
	_, _ = rand.Read(req.Anon[:])
	stream := sse.NewStream(StreamQueue)
	sink := &streamSink{s: s, stream: stream}
	req.Sink = sink
	req.Start = func(ws core.WatchStart) { stream.Offer(s.marker(c, ws)) }
	id, err := s.broker.Watch(ctx, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.broker.DropStream(id)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	_ = s.hub.Serve(w, r, stream, sse.Options{Overflow: endEvent("overflow", nil)})
}

// marker is the first event of a stream: the revision and, per selector,
// its subscription id, the first page of its snapshot and a cursor for the
// rest. It runs on the actor.
func (s *Server) marker(c *Caller, ws core.WatchStart) sse.Event {
	now := s.now()
	ev := api.SnapshotEvent{Epoch: s.broker.Epoch(), Revision: int64(ws.Revision), Subscriptions: make([]api.WatchSubscription, len(ws.Subscriptions))}
	for i, sub := range ws.Subscriptions {
		items := make([]api.LeaseItem, len(sub.Page.Items))
		for j, it := range sub.Page.Items {
			items[j] = itemBody(it, now)
		}
		out := api.WatchSubscription{Id: sub.ID, Selector: sub.Selector.String(), Items: items}
		if !sub.Page.Done {
			next := s.cursors.Encode(core.Cursor{Epoch: s.broker.Epoch(), Family: c.Family, Selector: sub.Selector.String(), Snapshot: ws.Snapshot.ID, After: sub.Page.After})
			out.NextCursor = &next
		}
		ev.Subscriptions[i] = out
	}
	data, _ := json.Marshal(ev)
	return sse.Event{Name: "snapshot", Data: data}
}

// endEvent is a terminal event. The core's ends (superseded, unsubscribed,
// session_closed) carry the revision at which they happened; the edge's
// (overflow, shutdown) carry none and pass nil.
func endEvent(reason string, revision *uint64) sse.Event {
	ev := api.StreamEndEvent{Reason: api.StreamEndReason(reason)}
	if revision != nil {
		rev := int64(*revision)
		ev.Revision = &rev
	}
	data, _ := json.Marshal(ev)
	return sse.Event{Name: reason, Data: data}
}

// streamSink is the edge of one stream as the actor sees it.
type streamSink struct {
	s      *Server
	stream *sse.Stream
}

// Change encodes a change for one registration and offers it; the body
// shared by all registrations of one event is encoded once per event.
func (k *streamSink) Change(e *core.Event, sub string) bool {
	body := k.s.changeBody(e)
	data := make([]byte, 0, len(body)+32+len(sub))
	data = append(data, `{"subscription_id":`...)
	data = strconv.AppendQuote(data, sub)
	data = append(data, ',')
	data = append(data, body[1:]...)
	ok := k.stream.Offer(sse.Event{Name: "change", ID: strconv.FormatUint(e.Revision, 10), Data: data})
	if ok {
		k.s.metrics.delivered.Inc()
	}
	return ok
}

// End offers the terminal event decided by the core.
func (k *streamSink) End(reason core.StreamEndReason, revision uint64) {
	k.stream.End(endEvent(reason.String(), &revision))
	if reason == core.EndSuperseded {
		k.s.metrics.supersedes.Inc()
	}
}

// changeBody is the JSON of a change without its subscription id, cached
// for the event being fanned out (the actor fans out one event at a time).
func (s *Server) changeBody(e *core.Event) []byte {
	if s.changeCache.rev == e.Revision && s.changeCache.fam == e.Family && s.changeCache.body != nil {
		return s.changeCache.body
	}
	ev := changeWire{Route: e.Route().String(), Kind: api.ChangeKind(e.Kind.String()), Revision: int64(e.Revision)}
	if e.Item != nil {
		it := itemBody(e.Item, s.now())
		ev.Item = &it
	}
	body, _ := json.Marshal(ev)
	s.changeCache.rev, s.changeCache.fam, s.changeCache.body = e.Revision, e.Family, body
	return body
}

// changeWire is api.ChangeEvent without its subscription id, which each
// registration's copy puts first.
type changeWire struct {
	Route    string         `json:"route"`
	Kind     api.ChangeKind `json:"kind"`
	Revision int64          `json:"revision"`
	Item     *api.LeaseItem `json:"item,omitempty"`
}

// changeCache is touched only on the actor goroutine.
type changeCache struct {
	rev  uint64
	fam  string
	body []byte
}
