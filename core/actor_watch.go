package core

import (
	"context"
	"time"
)

// StreamSink is the edge's side of one watch stream. The actor calls it on
// its own goroutine, so neither method may block: each must be a
// non-blocking offer into the stream's bounded queue.
type StreamSink interface {
	// Change offers one change for one registration; false means the stream
	// is finished (its queue overflowed or it ended) and must be dropped.
	Change(e *Event, subscriptionID string) bool
	// End offers the terminal event and lets the stream close; revision is
	// the broker revision at which the core ended the stream.
	End(reason StreamEndReason, revision uint64)
}

// WatchRequest opens one stream.
type WatchRequest struct {
	Family    string
	Session   *SessionID // nil: a read-only session for the stream
	Anon      SessionID  // the read-only session's fresh random id
	Selectors []Selector // validated and authorized by the caller
	Caller    string     // owner of the marker snapshot (per-caller cap)
	Sink      StreamSink
	// Start runs on the actor in the same step that registers the
	// selectors and takes the snapshot: it must put the marker first in
	// the stream's queue, before any change can be offered.
	Start func(WatchStart)
}

// Watch registers a stream; see State.Subscribe. It returns the stream's id.
func (b *Broker) Watch(ctx context.Context, req WatchRequest) (StreamID, error) {
	return callFam(ctx, b, req.Family, func(s *State, now time.Time) (StreamID, error) {
		// Process what is due and fan it out first: changes up to the
		// marker's revision are in its snapshot, never on the new stream.
		s.expireDue(now)
		b.drain()
		b.nextStream++
		st := b.nextStream
		ws, err := s.Subscribe(now, req.Family, req.Session, req.Anon, req.Selectors, st, req.Caller)
		if err != nil {
			return 0, err
		}
		b.sinks[st] = req.Sink
		b.streamFam[st] = req.Family
		req.Start(ws)
		return st, nil
	})
}

// DropStream forgets a finished stream; see State.DropStream.
func (b *Broker) DropStream(st StreamID) {
	_ = b.Exec(context.Background(), func(s *State, _ time.Time) error {
		s.DropStream(st)
		delete(b.sinks, st)
		delete(b.streamFam, st)
		return nil
	})
}

// Unsubscribe removes one registration; see State.Unsubscribe.
func (b *Broker) Unsubscribe(ctx context.Context, fam string, id SessionID, sel Selector) error {
	_, err := callFam(ctx, b, fam, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Unsubscribe(now, fam, id, sel)
	})
	return err
}

// fanOut offers the step's events to the streams of matching registrations
// (in revision order, one per registration), drops streams that refuse,
// then ends the streams the core ended.
func (b *Broker) fanOut(events []Event) {
	var dropped []StreamID
	for i := range events {
		e := &events[i]
		b.deliveries = b.state.Deliveries(e, b.deliveries[:0])
		b.state.stats.Changes++
		b.state.stats.Deliveries += uint64(len(b.deliveries))
		for _, d := range b.deliveries {
			if sink := b.sinks[d.Stream]; sink != nil && !sink.Change(e, d.SubscriptionID) {
				dropped = append(dropped, d.Stream)
				delete(b.sinks, d.Stream)
				delete(b.streamFam, d.Stream)
			}
		}
	}
	for _, st := range dropped {
		b.state.DropStream(st)
		b.state.stats.Overflows++
	}
	for _, end := range b.state.TakeStreamEnds() {
		if sink := b.sinks[end.Stream]; sink != nil {
			sink.End(end.Reason, b.state.famRevOf(b.streamFam[end.Stream]))
			delete(b.streamFam, end.Stream)
			delete(b.sinks, end.Stream)
		}
	}
}
