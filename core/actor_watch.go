package core

import (
	"context"
	"time"
)

// StreamSink is the edge's side of one watch stream. The actor calls it on
// its own goroutine, so neither method may block: each must be a
// non-blocking offer into the stream's bounded queue of a typed value; the
// encoding belongs to the stream's writer.
type StreamSink interface {
	// Change offers one change for one registration; false means the stream
	// is finished (its queue overflowed or it ended) and must be dropped.
	// c is valid during the call only: keep a copy of what is needed.
	Change(c *Change, subscriptionID string) bool
	// End offers the terminal event and lets the stream close; revision is
	// the broker revision at which the core ended the stream.
	End(reason StreamEndReason, revision Revision)
}

// Change is one change event on its way to the streams it reaches: the
// actor hands the same *Change to every delivery of the event, one after
// the other, on its own goroutine, then forgets it.
type Change struct {
	Event *Event    // the change; valid during the fan-out of the event only
	Time  time.Time // of the step: remaining_ms is measured at it
	// Shared is the edge's per-change value, so that the encoding of an
	// event is made once and shared by all its deliveries: nil for the
	// first delivery, then whatever the sinks stored in it. Only sinks
	// touch it, and only on the actor goroutine; what they store must be
	// safe to read from the writers of the streams it reaches.
	Shared any
}

// WatchRequest opens one stream: the registrations of SubscribeRequest,
// delivered to Sink.
type WatchRequest struct {
	SubscribeRequest
	Sink StreamSink
	// Start runs on the actor in the same step that registers the
	// selectors and takes the snapshot: it must put the marker first in
	// the stream's queue, before any change can be offered. Like the
	// sink's methods it must not block; it offers the typed WatchStart
	// and leaves the encoding to the stream's writer.
	Start func(WatchStart)
}

// Watch registers a stream; see State.Subscribe. It returns the stream's id.
// Registering, taking the snapshot and queueing the marker are one step;
// the changes before it are in the snapshot and never reach the new stream
// (Subscribe matches them first), the changes after it follow the marker.
func (b *Broker) Watch(ctx context.Context, req WatchRequest) (StreamID, error) {
	return callFam(ctx, b, req.Family, func(s *State, now time.Time) (StreamID, error) {
		b.nextStream++
		st := b.nextStream
		ws, err := s.Subscribe(now, st, req.SubscribeRequest)
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
func (b *Broker) Unsubscribe(ctx context.Context, fam Family, id SessionID, sel Selector) error {
	_, err := callFam(ctx, b, fam, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Unsubscribe(now, fam, id, sel)
	})
	return err
}

// fanOut offers the step's changes to the streams of their deliveries (in
// revision order, one per registration), ends the streams the core ended,
// then tells the core which streams refused a change (an input: rd is not
// read after it).
func (b *Broker) fanOut(rd Ready, now time.Time) {
	for i, to := range rd.To {
		if len(to) == 0 {
			continue
		}
		b.change = Change{Event: &rd.Events[i], Time: now}
		for _, d := range to {
			if sink := b.sinks[d.Stream]; sink != nil && !sink.Change(&b.change, d.SubscriptionID) {
				b.refused = append(b.refused, d.Stream)
				delete(b.sinks, d.Stream)
				delete(b.streamFam, d.Stream)
			}
		}
	}
	b.change = Change{}
	for _, end := range rd.Ends {
		if sink := b.sinks[end.Stream]; sink != nil {
			sink.End(end.Reason, b.state.famRevOf(b.streamFam[end.Stream]))
			delete(b.streamFam, end.Stream)
			delete(b.sinks, end.Stream)
		}
	}
	for _, st := range b.refused {
		b.state.Overflowed(st)
	}
	b.refused = b.refused[:0]
}
