package handlers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

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
	req := core.WatchRequest{SubscribeRequest: core.SubscribeRequest{Family: c.Family, Selectors: sels, Caller: snapshotOwner(c)}}
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
	stream, id, err := s.openStream(ctx, c, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.broker.DropStream(id)
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	_ = s.hub.Serve(w, r, stream, sse.Options{Overflow: endEvent("overflow", nil), Pool: s.writers})
}

// newWriterPool writes the watch streams on as many goroutines as there
// are processors: a change offered to many streams puts each on a ready
// list rather than waking a goroutine per stream, a busy stream's events
// go out together on its next turn, and the requests that make the changes
// are not queued behind thousands of writers.
func newWriterPool() *sse.Pool {
	return sse.NewPool(runtime.GOMAXPROCS(0), 0)
}

// openStream registers req's selectors for a new stream of caller c, in
// one actor step that also queues the marker first; the stream's sink and
// marker only enqueue typed values.
func (s *Server) openStream(ctx context.Context, c *Caller, req core.WatchRequest) (*sse.Stream, core.StreamID, error) {
	_, _ = rand.Read(req.Anon[:])
	stream := sse.NewStream(StreamQueue)
	req.Sink = &streamSink{metrics: s.metrics, stream: stream}
	req.Start = func(ws core.WatchStart) {
		stream.Offer(sse.Event{Name: "snapshot", Payload: &marker{s: s, family: c.Family, ws: ws}})
	}
	id, err := s.broker.Watch(ctx, req)
	return stream, id, err
}

// The watch stream's events are typed values handed over by the actor
// (core.WatchStart, core.Change) and encoded by sse.Payload on the writer
// goroutine of each stream, once per event: the actor only enqueues.

// marker is the first event of a stream: the revision and, per selector,
// its subscription id, the first page of its snapshot and a cursor for the
// rest. The actor queues it; its one stream's writer encodes it.
type marker struct {
	s      *Server
	family core.Family
	ws     core.WatchStart
}

// AppendData encodes the marker; it signs the cursors.
func (m *marker) AppendData(b []byte) []byte {
	ws, epoch := m.ws, m.s.broker.Epoch()
	ev := api.SnapshotEvent{Epoch: epoch, Revision: int64(ws.Revision), Subscriptions: make([]api.WatchSubscription, len(ws.Subscriptions))}
	for i, sub := range ws.Subscriptions {
		items := make([]api.LeaseItem, len(sub.Page.Items))
		for j, it := range sub.Page.Items {
			items[j] = itemBody(it, ws.Time)
		}
		out := api.WatchSubscription{Id: sub.ID, Selector: sub.Selector.String(), Items: items}
		if !sub.Page.Done {
			next := m.s.cursors.Encode(core.Cursor{Epoch: epoch, Family: m.family, Selector: sub.Selector.String(), Snapshot: ws.Snapshot.ID, After: sub.Page.After})
			out.NextCursor = &next
		}
		ev.Subscriptions[i] = out
	}
	return appendJSON(b, ev)
}

// appendJSON appends the JSON of v (a wire type: it always encodes).
func appendJSON(b []byte, v any) []byte {
	data, _ := json.Marshal(v)
	return append(b, data...)
}

// endEvent is a terminal event. The core's ends (superseded, unsubscribed,
// session_closed) carry the revision at which they happened; the edge's
// (overflow, shutdown) carry none and pass nil.
func endEvent(reason string, revision *core.Revision) sse.Event {
	ev := &api.StreamEndEvent{Reason: api.StreamEndReason(reason)}
	if revision != nil {
		rev := int64(*revision)
		ev.Revision = &rev
	}
	return sse.Event{Name: reason, Payload: (*endData)(ev)}
}

// endData encodes a terminal event on the writer.
type endData api.StreamEndEvent

func (e *endData) AppendData(b []byte) []byte { return appendJSON(b, (*api.StreamEndEvent)(e)) }

// streamSink is the edge of one stream as the actor sees it: it only
// enqueues typed values.
type streamSink struct {
	metrics *Metrics
	stream  *sse.Stream
}

// Change offers a change for one registration. The first delivery of an
// event makes the event's shared encoder (a change); every delivery queues
// a reference to it with its subscription id, taken from a slab the change
// hands out (one allocation per deliverySlab deliveries, not one each).
func (k *streamSink) Change(c *core.Change, sub string) bool {
	ch, _ := c.Shared.(*change)
	if ch == nil {
		ch = &change{ev: *c.Event, at: c.Time, id: strconv.FormatUint(uint64(c.Event.Revision), 10)}
		c.Shared = ch
	}
	ok := k.stream.Offer(sse.Event{Name: "change", ID: ch.id, Payload: ch.delivery(sub)})
	if ok {
		k.metrics.delivered.Inc()
	}
	return ok
}

// End offers the terminal event decided by the core.
func (k *streamSink) End(reason core.StreamEndReason, revision core.Revision) {
	k.stream.End(endEvent(reason.String(), &revision))
	if reason == core.EndSuperseded {
		k.metrics.supersedes.Inc()
	}
}

// change is one change event shared by all its deliveries: the first
// writer to need it encodes its body, once; the others copy the bytes.
type change struct {
	ev   core.Event // a copy: the actor reuses its own
	at   time.Time  // of the step: remaining_ms is measured at it
	id   string     // the SSE id: the revision
	once sync.Once
	body []byte // the JSON of the change without its subscription id

	// slab holds the deliveries handed out last; only the actor touches
	// it (through the sinks), each writer reads its own element only.
	slab []delivery
}

// deliverySlab is how many deliveries of a change share an allocation.
const deliverySlab = 128

// delivery hands out the delivery of the change to registration sub.
func (ch *change) delivery(sub string) *delivery {
	if len(ch.slab) == cap(ch.slab) {
		ch.slab = make([]delivery, 0, deliverySlab)
	}
	ch.slab = append(ch.slab, delivery{ch, sub})
	return &ch.slab[len(ch.slab)-1]
}

func (ch *change) encoded() []byte {
	ch.once.Do(func() {
		w := changeWire{Route: ch.ev.Route().String(), Kind: api.ChangeKind(ch.ev.Kind.String()), Revision: int64(ch.ev.Revision)}
		if ch.ev.Item != nil {
			it := itemBody(ch.ev.Item, ch.at)
			w.Item = &it
		}
		ch.body, _ = json.Marshal(w)
		ch.ev.Item = nil // encoded: let the item go
	})
	return ch.body
}

// delivery is one registration's copy of a change: the subscription id
// first, then the shared body.
type delivery struct {
	ch  *change
	sub string
}

func (d *delivery) AppendData(b []byte) []byte {
	body := d.ch.encoded()
	b = append(b, `{"subscription_id":`...)
	b = strconv.AppendQuote(b, d.sub)
	b = append(b, ',')
	return append(b, body[1:]...)
}

// changeWire is api.ChangeEvent without its subscription id, which each
// registration's copy puts first.
type changeWire struct {
	Route    string         `json:"route"`
	Kind     api.ChangeKind `json:"kind"`
	Revision int64          `json:"revision"`
	Item     *api.LeaseItem `json:"item,omitempty"`
}
