package core

import (
	"context"
	"time"

	"github.com/musterhq/muster"
)

// TickInterval is how often the actor processes expiry without being asked.
const TickInterval = 50 * time.Millisecond

// Broker runs one State in one goroutine. Callers send commands (closures
// over the State with a one-slot reply) and wait for the reply; no mutex
// guards the state, and the actor never blocks on I/O or on a slow client.
//
// Concurrency properties: commands run one at a time in arrival order; a
// command that was accepted runs to completion even if its caller's context
// ends (the caller still gets its reply when it waits); after Close every
// call fails with muster.CodeUnavailable. After each step the actor hands
// out what the step produced (State.Ready) as typed values, through
// non-blocking sends and offers only: it encodes nothing, and what it hands
// to the streams is never changed afterwards, so the streams' writers read
// it on their own goroutines.
type Broker struct {
	clock Clock
	state *State
	cmds  chan func(*State, time.Time)
	quit  chan struct{}
	done  chan struct{}
	// Owned by the actor goroutine:
	waiting    map[Ticket]chan WaitResult // queued acquisitions by ticket
	sink       func([]Event)
	sinks      map[StreamID]StreamSink
	streamFam  map[StreamID]Family // the family of each stream in sinks
	nextStream StreamID
	change     Change     // the change being fanned out (see fanOut)
	refused    []StreamID // streams that refused a change in this step
}

// NewBroker starts the actor for a fresh State. sink, if not nil, receives
// the events of every step, in revision order, on the actor goroutine: it
// must not block (fan-out is a non-blocking offer into bounded queues).
func NewBroker(cfg Config, clock Clock, sink func([]Event)) *Broker {
	if clock == nil {
		clock = SystemClock{}
	}
	b := &Broker{
		clock:     clock,
		state:     NewState(cfg),
		cmds:      make(chan func(*State, time.Time), 256),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		waiting:   make(map[Ticket]chan WaitResult),
		sink:      sink,
		sinks:     make(map[StreamID]StreamSink),
		streamFam: make(map[StreamID]Family),
	}
	go b.run()
	return b
}

func (b *Broker) run() {
	defer close(b.done)
	t := time.NewTicker(TickInterval)
	defer t.Stop()
	for {
		var now time.Time
		select {
		case f := <-b.cmds:
			now = b.clock.Now()
			f(b.state, now)
		case <-t.C:
			now = b.clock.Now()
			b.state.Tick(now)
		case <-b.quit:
			return
		}
		b.drain(now)
	}
}

// drain hands out what the step at now produced (State.Ready): its wait
// results to their waiting requests (a one-slot buffered channel each:
// never blocks), its events to the sink and to the watch streams, and its
// stream ends to their streams. It hands out typed values only: encoding
// them is the edge's work, off the actor.
func (b *Broker) drain(now time.Time) {
	rd := b.state.Ready()
	for _, r := range rd.Results {
		if ch, ok := b.waiting[r.Ticket]; ok {
			ch <- r
			delete(b.waiting, r.Ticket)
		}
	}
	if len(rd.Events) > 0 && b.sink != nil {
		b.sink(rd.Events)
	}
	b.fanOut(rd, now)
}

// Close stops the actor and waits for it. It is safe to call more than once.
func (b *Broker) Close() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
}

// Epoch is the id of this broker lifetime.
func (b *Broker) Epoch() string { return b.state.cfg.Epoch }

var errClosed = muster.Errorf(muster.CodeUnavailable, "the broker is shutting down")

// call runs f on the actor and returns its result. The caller's context only
// bounds the wait to enqueue; once enqueued the command runs and its reply is
// awaited, so the caller learns the outcome of every committed change.
func call[T any](ctx context.Context, b *Broker, f func(*State, time.Time) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	reply := make(chan result, 1)
	cmd := func(s *State, now time.Time) {
		v, err := f(s, now)
		reply <- result{v, err}
	}
	var zero T
	select {
	case b.cmds <- cmd:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.quit:
		return zero, errClosed
	}
	select {
	case r := <-reply:
		return r.v, r.err
	case <-b.done:
		return zero, errClosed
	}
}

// callFam is call for a command of family fam: in a placed core, a family
// this broker does not serve now is refused (wrong_broker) before f runs.
func callFam[T any](ctx context.Context, b *Broker, fam Family, f func(*State, time.Time) (T, error)) (T, error) {
	return call(ctx, b, func(s *State, now time.Time) (T, error) {
		if err := s.gate(now, fam); err != nil {
			var zero T
			return zero, err
		}
		return f(s, now)
	})
}

// CreateSession creates a session; see State.CreateSession.
func (b *Broker) CreateSession(ctx context.Context, req SessionRequest) (SessionInfo, error) {
	return callFam(ctx, b, req.Family, func(s *State, now time.Time) (SessionInfo, error) {
		return s.CreateSession(now, req)
	})
}

// Keepalive extends a session; see State.Keepalive.
func (b *Broker) Keepalive(ctx context.Context, family Family, id SessionID) (SessionInfo, error) {
	return callFam(ctx, b, family, func(s *State, now time.Time) (SessionInfo, error) {
		return s.Keepalive(now, family, id)
	})
}

// EndSession ends a session; see State.EndSession.
func (b *Broker) EndSession(ctx context.Context, family Family, id SessionID) error {
	_, err := callFam(ctx, b, family, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.EndSession(now, family, id)
	})
	return err
}

// Stats reads the counters without processing due expiry (the tick does
// that); answering also proves the actor is alive (readiness).
func (b *Broker) Stats(ctx context.Context) (Stats, error) {
	return call(ctx, b, func(s *State, _ time.Time) (Stats, error) {
		return s.Stats(), nil
	})
}

// Exec runs f on the actor as one step, like any command. It exists for
// tools, tests and benchmarks that prepare state in bulk; the broker itself
// uses the typed methods.
func (b *Broker) Exec(ctx context.Context, f func(s *State, now time.Time) error) error {
	_, err := call(ctx, b, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, f(s, now)
	})
	return err
}

// Serve starts or continues serving a family until the deadline; see
// State.Serve. The placement loop at the edge calls it after every claim
// acquisition and renewal.
func (b *Broker) Serve(ctx context.Context, fam Family, epoch PlacementEpoch, until time.Time) error {
	_, err := call(ctx, b, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Serve(now, fam, epoch, until)
	})
	return err
}

// Unserve drops a family now (a planned move); see State.Unserve.
func (b *Broker) Unserve(ctx context.Context, fam Family) error {
	_, err := call(ctx, b, func(s *State, now time.Time) (struct{}, error) {
		s.Unserve(now, fam)
		return struct{}{}, nil
	})
	return err
}

// Export stops serving fam and returns its state for the next owner (a
// planned move); see State.Export.
func (b *Broker) Export(ctx context.Context, fam Family, salt []byte) (Handover, error) {
	return call(ctx, b, func(s *State, now time.Time) (Handover, error) {
		return s.Export(now, fam, salt)
	})
}

// Import starts serving fam with the state another owner exported; see
// State.Import.
func (b *Broker) Import(ctx context.Context, fam Family, epoch PlacementEpoch, until time.Time, h Handover, transit time.Duration) error {
	_, err := call(ctx, b, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Import(now, fam, epoch, until, h, transit)
	})
	return err
}

// Placement reads a family's serving state; see State.Placement.
func (b *Broker) Placement(ctx context.Context, fam Family) (FamilyPlacement, error) {
	return call(ctx, b, func(s *State, now time.Time) (FamilyPlacement, error) {
		return s.Placement(now, fam), nil
	})
}

// SetLimits replaces the caps and quotas in place; see State.SetLimits.
func (b *Broker) SetLimits(ctx context.Context, l Config) error {
	_, err := call(ctx, b, func(s *State, _ time.Time) (struct{}, error) {
		s.SetLimits(l)
		return struct{}{}, nil
	})
	return err
}
