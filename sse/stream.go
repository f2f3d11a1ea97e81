package sse

import (
	"sync"
	"sync/atomic"
)

// DefaultCapacity is the queue capacity the broker gives each watch stream.
const DefaultCapacity = 1024

// Stream is the bounded queue between a producer (the broker's actor) and the
// one writer goroutine that Serve runs for it. See the package documentation
// for what a caller may rely on.
//
// The queue is a slice guarded by a mutex plus a one-slot wake channel, not a
// buffered channel of Events: a channel of capacity 1024 would allocate
// 1024×72 bytes per stream up front, where the slice grows only as events
// wait and the writer gives small buffers back, so an idle stream costs a few
// hundred bytes. The mutex also lets End, overflow and the writer's hand-over
// of a whole batch be one atomic step, and it is held only for a slice append
// or swap, never across I/O.
type Stream struct {
	mu       sync.Mutex
	queue    []Event // waiting for the writer; len(queue) <= capacity
	capacity int
	state    streamState
	final    Event // the terminal event once state is ending (unless overflow)
	overflow bool  // the terminal is the overflow event from Options
	served   bool

	wake chan struct{} // one slot: "queue, state or final changed"
	// pooled is set once a Pool writes the stream; then a signal puts the
	// stream on the pool's ready list instead of waking its goroutine.
	pooled atomic.Pointer[pooled]
	done   chan struct{} // closed when the writer has returned
}

type streamState uint8

const (
	stateOpen   streamState = iota // accepting offers
	stateEnding                    // a terminal is set; nothing more is accepted
	stateClosed                    // the writer has returned
)

// NewStream returns an open stream whose queue holds at most capacity
// events waiting for the writer (DefaultCapacity if capacity < 1). The batch
// the writer is writing at the moment is not counted.
func NewStream(capacity int) *Stream {
	if capacity < 1 {
		capacity = DefaultCapacity
	}
	return &Stream{
		capacity: capacity,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// Offer queues ev for writing and reports whether it was accepted. It never
// blocks and is safe from any goroutine.
//
// It returns false when the stream no longer accepts events: after End, after
// overflow, or once the writer has returned. When the queue is full, Offer
// marks the stream overflowed and returns false; the writer then writes what
// was queued, the overflow event and closes. A false return always means the
// stream is ending: no event after a refused one is ever written, so the
// client never sees a gap, only an end.
func (s *Stream) Offer(ev Event) bool {
	s.mu.Lock()
	if s.state != stateOpen {
		s.mu.Unlock()
		return false
	}
	n := len(s.queue)
	if n >= s.capacity {
		s.state = stateEnding
		s.overflow = true
		s.mu.Unlock()
		s.signal()
		return false
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	if n == 0 {
		// The writer takes the whole queue after consuming the wake slot,
		// so only the offer that makes the queue non-empty has to wake it.
		s.signal()
	}
	return true
}

// End asks the writer to write final after everything already queued, then
// close the stream. It never blocks and is safe from any goroutine. Only the
// first terminal counts: End after End, after overflow or after the writer
// has returned does nothing.
func (s *Stream) End(final Event) {
	s.mu.Lock()
	if s.state != stateOpen {
		s.mu.Unlock()
		return
	}
	s.state = stateEnding
	s.final = final
	s.mu.Unlock()
	s.signal()
}

// Done is closed when the writer (Serve) has returned, whatever the reason.
// It is never closed for a stream that was not served.
func (s *Stream) Done() <-chan struct{} { return s.done }

func (s *Stream) signal() {
	if ps := s.pooled.Load(); ps != nil {
		ps.pool.signal(ps)
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// batch is what the writer takes from the queue in one step.
type batch struct {
	events   []Event
	ending   bool  // write final after events, then close
	overflow bool  // the terminal is the overflow event
	final    Event // the terminal when ending && !overflow
}

// take hands the queued events to the writer and gives the queue spare, an
// empty slice the writer no longer needs, to fill next.
func (s *Stream) take(spare []Event) batch {
	s.mu.Lock()
	b := batch{
		events:   s.queue,
		ending:   s.state == stateEnding,
		overflow: s.overflow,
		final:    s.final,
	}
	s.queue = spare[:0]
	s.mu.Unlock()
	return b
}

// claim marks the stream as served; it fails if it already was.
func (s *Stream) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served {
		return false
	}
	s.served = true
	return true
}

// close refuses all further offers, drops what is still queued and closes
// Done. Only the writer calls it, once.
func (s *Stream) close() {
	s.mu.Lock()
	s.state = stateClosed
	s.queue = nil
	s.final = Event{}
	s.mu.Unlock()
	close(s.done)
}

// trim gives back the queue buffer of an idle stream.
func (s *Stream) trim() {
	s.mu.Lock()
	if len(s.queue) == 0 {
		s.queue = nil
	}
	s.mu.Unlock()
}
