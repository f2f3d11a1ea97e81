package muster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/musterhq/muster/clients/go/api"
)

// ChangeKind says how the held set changed for a route.
type ChangeKind string

// The change kinds of the contract: acquired adds (or replaces) the holder
// of Route; every other kind removes it.
const (
	Acquired      ChangeKind = "acquired"
	Released      ChangeKind = "released"
	Expired       ChangeKind = "expired"
	SessionClosed ChangeKind = "session_closed"
	RolledBack    ChangeKind = "rolled_back"
)

// Change is one change of the held set, for one selector of the stream:
// a plain, read-only value (a hint, not a command: it grants nothing).
type Change struct {
	Selector string // the selector (as given to Watch) whose registration matched
	Route    string // the concrete route that changed
	Kind     ChangeKind
	Revision int64 // the broker revision of the change
	Item     Item  // the new holder when Kind is Acquired, else zero
}

// Marker is the first event of a stream: the broker lifetime and revision
// at which the registrations were made, and per selector the first page of
// its snapshot at that revision. Every change after it has a higher revision.
type Marker struct {
	Epoch     string
	Revision  int64
	Selectors []MarkerPage // in the order given to Watch
}

// MarkerPage is the first snapshot page of one selector. When NextCursor is
// not "", List(ctx, Selector, ListOptions{Cursor: NextCursor}) pages the rest
// of the same snapshot.
type MarkerPage struct {
	Selector   string
	Items      []Item
	NextCursor string
}

// Stream-end errors: a Subscription's Err after its Events channel closed
// because the broker ended the stream with that terminal event. Each also
// matches ErrStreamEnded; errors.As gives the *StreamEndError (with the
// revision, when the broker sent one).
var (
	// ErrOverflow: this client read too slowly and the stream's queue at
	// the broker filled up. Changes were lost: rebuild the view.
	ErrOverflow = &StreamEndError{Reason: "overflow"}
	// ErrSuperseded: the same session opened the same selector on a newer
	// stream, which carries the registration on.
	ErrSuperseded = &StreamEndError{Reason: "superseded"}
	// ErrUnsubscribed: the stream's last registration was removed.
	ErrUnsubscribed = &StreamEndError{Reason: "unsubscribed"}
	// ErrStreamSessionClosed: the session the stream belonged to ended.
	ErrStreamSessionClosed = &StreamEndError{Reason: "session_closed"}
	// ErrShutdown: the broker is shutting down.
	ErrShutdown = &StreamEndError{Reason: "shutdown"}
	// ErrMoved: the family moved to another broker in a planned move; its
	// sessions and leases live on there. Watch again (the client follows
	// wrong_broker to the new owner); an Observer does so by itself.
	ErrMoved = &StreamEndError{Reason: "moved"}
)

// StreamEndError is a terminal event of a watch stream.
type StreamEndError struct {
	Reason   string
	Revision int64
}

func (e *StreamEndError) Error() string { return "muster: watch stream ended: " + e.Reason }

// Is matches the sentinel of the same reason, and ErrStreamEnded.
func (e *StreamEndError) Is(target error) bool {
	if target == ErrStreamEnded {
		return true
	}
	t, ok := target.(*StreamEndError)
	return ok && t.Reason == e.Reason
}

// Subscription is one open watch stream. Events delivers the changes in
// revision order and is closed when the stream ends; Err then says why. The
// stream is never resumed: after an end, open a new one and rebuild from its
// marker (or use Observe, which does all of this).
//
// A consumer that stops reading Events makes the broker end the stream with
// ErrOverflow once its queue fills; nothing is skipped silently.
type Subscription struct {
	c       *Client
	session *Session // nil for a stream that is its own read-only session
	marker  Marker
	bySub   map[string]string // subscription id → selector

	events chan Change
	cancel context.CancelFunc
	body   io.ReadCloser
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// Watch opens a watch stream over selectors (at most 32), as its own
// read-only session, and returns once the marker has arrived. ctx bounds the
// whole stream: cancelling it ends the stream like Close.
func (c *Client) Watch(ctx context.Context, selectors ...string) (*Subscription, error) {
	return c.watch(ctx, nil, selectors)
}

// Watch opens a watch stream whose registrations belong to the session:
// they end with it, a duplicate open of the same selector supersedes the
// older stream, and Subscription.Unsubscribe can remove one of them.
func (s *Session) Watch(ctx context.Context, selectors ...string) (*Subscription, error) {
	return s.c.watch(ctx, s, selectors)
}

func (c *Client) watch(ctx context.Context, s *Session, selectors []string) (*Subscription, error) {
	if len(selectors) == 0 {
		return nil, &Error{Code: ErrInvalidSelector.Code, Detail: "Watch needs at least one selector"}
	}
	params := &api.WatchLeasesParams{Selector: selectors}
	if s != nil {
		params.MusterSession = &s.id
	}
	req, err := api.NewWatchLeasesRequest(c.base, params)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req = req.WithContext(sctx)
	req.Header.Set("Accept", "text/event-stream")
	_ = c.authorize(sctx, req)
	resp, err := c.sse.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	c.sawEpoch(resp)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if resp.StatusCode == http.StatusOK {
			return nil, fmt.Errorf("muster: watch answered %q, not an event stream", mt)
		}
		return nil, c.problem(resp, body)
	}
	sub := &Subscription{
		c: c, session: s, bySub: make(map[string]string),
		events: make(chan Change, 64), cancel: cancel, body: resp.Body, done: make(chan struct{}),
	}
	rd := newSSEReader(resp.Body, maxEventSize)
	if err := sub.readMarker(rd); err != nil {
		cancel()
		resp.Body.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	go sub.read(sctx, rd)
	return sub, nil
}

func (sub *Subscription) readMarker(rd *sseReader) error {
	ev, err := rd.next()
	if err != nil {
		return fmt.Errorf("%w before its marker: %w", ErrStreamEnded, err)
	}
	if ev.Name != "snapshot" {
		if end := streamEnd(ev); end != nil {
			return end
		}
		return fmt.Errorf("muster: the first event of a watch stream is %q, not snapshot", ev.Name)
	}
	var m api.SnapshotEvent
	if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
		return fmt.Errorf("muster: decoding the snapshot marker: %w", err)
	}
	sub.marker = Marker{Epoch: m.Epoch, Revision: m.Revision}
	for _, s := range m.Subscriptions {
		sub.bySub[s.Id] = s.Selector
		p := MarkerPage{Selector: s.Selector, Items: itemsFrom(s.Items)}
		if s.NextCursor != nil {
			p.NextCursor = *s.NextCursor
		}
		sub.marker.Selectors = append(sub.marker.Selectors, p)
	}
	return nil
}

// read forwards changes until the stream ends.
func (sub *Subscription) read(ctx context.Context, rd *sseReader) {
	defer close(sub.done)
	defer close(sub.events)
	defer sub.body.Close()
	for {
		ev, err := rd.next()
		if err != nil {
			if ctx.Err() != nil {
				sub.fail(ErrClosed)
			} else {
				sub.fail(fmt.Errorf("%w: %w", ErrStreamEnded, err))
			}
			return
		}
		if ev.Name != "change" {
			if end := streamEnd(ev); end != nil {
				sub.fail(end)
				return
			}
			continue // an event this SDK does not know: ignore, for compatibility
		}
		var c api.ChangeEvent
		if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
			sub.fail(fmt.Errorf("%w: undecodable change: %w", ErrStreamEnded, err))
			return
		}
		ch := Change{Selector: sub.bySub[c.SubscriptionId], Route: c.Route, Kind: ChangeKind(c.Kind), Revision: c.Revision}
		if c.Item != nil {
			ch.Item = itemFrom(*c.Item)
		}
		select {
		case sub.events <- ch:
		case <-ctx.Done():
			sub.fail(ErrClosed)
			return
		}
	}
}

// streamEnd decodes a terminal event, nil for any other event.
func streamEnd(ev sseEvent) error {
	switch ev.Name {
	case "overflow", "superseded", "unsubscribed", "session_closed", "shutdown", "moved":
	default:
		return nil
	}
	var e api.StreamEndEvent
	_ = json.Unmarshal([]byte(ev.Data), &e)
	end := &StreamEndError{Reason: ev.Name}
	if e.Revision != nil {
		end.Revision = *e.Revision
	}
	return end
}

func (sub *Subscription) fail(err error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.err == nil {
		sub.err = err
	}
}

// Marker is the stream's first event.
func (sub *Subscription) Marker() Marker { return sub.marker }

// Events delivers the changes; it is closed when the stream ends.
func (sub *Subscription) Events() <-chan Change { return sub.events }

// Done is closed when the stream has ended and Events is closed.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Err is nil while the stream is open, then why it ended: a
// *StreamEndError (ErrOverflow, ErrSuperseded, …), ErrStreamEnded wrapping a
// transport error, or ErrClosed after Close or the end of Watch's context.
func (sub *Subscription) Err() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.err
}

// Close ends the stream and waits until its reader has stopped. The
// registrations of a session-less stream end with it; those of a session
// stream are removed by the broker when it notices the stream is gone.
func (sub *Subscription) Close() error {
	sub.fail(ErrClosed)
	sub.cancel()
	<-sub.done
	return nil
}

// Unsubscribe removes the registration of selector (the original string
// given to Watch) from the session; the broker ends the stream with
// ErrUnsubscribed when it was the last one. Only a session stream
// (Session.Watch) has registrations to remove; a session-less stream answers
// ErrInvalidRequest: Close it instead.
func (sub *Subscription) Unsubscribe(ctx context.Context, selector string) error {
	if sub.session == nil {
		return &Error{Code: ErrInvalidRequest.Code, Detail: "a session-less stream has no registration to remove: Close it"}
	}
	resp, err := sub.c.raw.Unsubscribe(ctx, sub.session.id, &api.UnsubscribeParams{Selector: selector})
	return sub.c.call(resp, err, 204, nil)
}
