package sse

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pool writes the streams served with it (Options.Pool) on a few
// goroutines instead of one per stream.
//
// Without a pool, each stream's writer is its handler goroutine, parked
// until the stream has something to write: a change offered to 1,000
// streams wakes 1,000 goroutines, each to write its one event and park
// again. With a pool, a stream with something to write joins a ready list,
// and at most the pool's size of workers take streams from it in order and
// write each one's whole queue. A change then costs one list entry per
// stream, not a wake and a park; with 10,000 busy streams each write
// carries every event since the stream's last turn; and the requests that
// make the changes compete with a few workers, not thousands of writers.
// Workers are started when streams are ready and end when none is.
//
// A worker blocked in a write (a client that stopped reading fills its
// socket buffer) stops counting against the pool's size after MaxHold (at
// most one and a half): another worker starts, so a stalled client delays
// the others by about MaxHold, and is itself cut off by its write deadline
// as before. The pool never changes what a stream writes or in which
// order, only which goroutine writes it and when.
type Pool struct {
	mu       sync.Mutex
	ready    []*pooled // FIFO; ready[0] is next
	busy     []*pooled // being written by a counted worker
	workers  int       // counted workers running
	size     int
	maxHold  time.Duration
	watching bool // a goroutine is watching busy for MaxHold
	overtook uint64
}

// DefaultMaxHold is how long a pool's worker may write one stream before
// it stops counting against the pool's size.
const DefaultMaxHold = 2 * time.Millisecond

// NewPool returns a pool of n workers (at least 1) that stops counting a
// worker busy with one stream for longer than maxHold (DefaultMaxHold if
// not positive).
func NewPool(n int, maxHold time.Duration) *Pool {
	if maxHold <= 0 {
		maxHold = DefaultMaxHold
	}
	return &Pool{size: max(n, 1), maxHold: maxHold}
}

// Overtaken is how many times a worker stopped counting because it wrote
// one stream for longer than MaxHold (a write blocked on a slow client, or
// a worker that got no processor for that long).
func (p *Pool) Overtaken() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.overtook
}

// pooled is a stream served by a pool: the state Serve's loop keeps in
// its locals without one.
type pooled struct {
	pool       *Pool
	s          *Stream
	wr         *writer
	gone, beat *atomic.Bool
	hb         *time.Timer
	result     chan turnEnd // Serve's answer, sent once

	// Guarded by pool.mu.
	queued, running, again, finished bool
	since                            time.Time // when its turn started
	at                               int       // index in busy, or -1
}

// turnEnd is how a stream's last turn ended.
type turnEnd struct {
	terminal bool  // the terminal event was written
	err      error // a write failed
}

// attach hands ps's stream to the pool after Serve's first write: from now
// on its signals put it on the ready list, and if it was signalled since
// the first write, it is ready at once.
func (p *Pool) attach(ps *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps.at = -1
	ps.s.pooled.Store(ps)
	select {
	case <-ps.s.wake: // signalled since the first write
		p.readyLocked(ps)
	default:
	}
}

// signal is readyLocked for a stream's signal.
func (p *Pool) signal(ps *pooled) {
	p.mu.Lock()
	p.readyLocked(ps)
	p.mu.Unlock()
}

// readyLocked puts ps on the ready list unless it is there, being written
// (then it goes back on after its turn) or finished, and starts a worker
// if fewer than the pool's size count. Callers hold p.mu.
func (p *Pool) readyLocked(ps *pooled) {
	switch {
	case ps.finished || ps.queued:
	case ps.running:
		ps.again = true
	default:
		ps.queued = true
		p.ready = append(p.ready, ps)
		if p.workers < p.size {
			p.workers++
			go p.work()
		} else if !p.watching {
			p.watching = true
			go p.watch()
		}
	}
}

// work writes ready streams, one turn each in list order, until none is
// ready, or until it was overtaken.
func (p *Pool) work() {
	p.mu.Lock()
	for len(p.ready) > 0 {
		ps := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		if len(p.ready) == 0 {
			p.ready = p.ready[:0:0] // let the backing array go
		}
		ps.queued, ps.running, ps.since = false, true, time.Now()
		ps.at = len(p.busy)
		p.busy = append(p.busy, ps)
		p.mu.Unlock()

		end, done := ps.turn()

		p.mu.Lock()
		ps.running = false
		counted := ps.at >= 0
		if counted {
			p.unbusy(ps)
		}
		if done {
			ps.finished = true
			ps.result <- end
		} else if ps.again {
			ps.again = false
			ps.queued = true
			p.ready = append(p.ready, ps)
		}
		if !counted {
			p.mu.Unlock()
			return // overtaken: a worker started in this one's place
		}
	}
	p.workers--
	p.mu.Unlock()
}

// unbusy removes ps from busy. Callers hold p.mu.
func (p *Pool) unbusy(ps *pooled) {
	last := len(p.busy) - 1
	p.busy[ps.at] = p.busy[last]
	p.busy[ps.at].at = ps.at
	p.busy[last] = nil
	p.busy = p.busy[:last]
	ps.at = -1
}

// watch runs while streams wait and every counted worker is busy: every
// half MaxHold (at most every 10 ms) it stops counting the workers busy
// with one stream for longer than MaxHold and starts others in their
// place.
func (p *Pool) watch() {
	tick := min(p.maxHold/2, 10*time.Millisecond)
	for {
		time.Sleep(tick)
		p.mu.Lock()
		if len(p.ready) == 0 {
			p.watching = false
			p.mu.Unlock()
			return
		}
		now := time.Now()
		for i := 0; i < len(p.busy); {
			if ps := p.busy[i]; now.Sub(ps.since) > p.maxHold {
				p.unbusy(ps) // moves the last busy stream to i
				p.workers--
				p.overtook++
				continue
			}
			i++
		}
		for n := 0; p.workers < p.size && n < len(p.ready); n++ {
			p.workers++
			go p.work()
		}
		p.mu.Unlock()
	}
}

// turn writes what is queued, and a keepalive if the heartbeat is due;
// done says the stream is over (the client left, the terminal was
// written, or a write failed).
func (ps *pooled) turn() (end turnEnd, done bool) {
	if ps.gone.Load() {
		return turnEnd{}, true
	}
	ending, err := ps.wr.writeBatch(ps.s, false)
	if err != nil || ending {
		return turnEnd{terminal: ending, err: err}, true
	}
	if ps.beat.Load() {
		ps.beat.Store(false)
		if err := ps.wr.heartbeat(ps.s, ps.hb); err != nil {
			return turnEnd{err: err}, true
		}
	}
	return turnEnd{}, false
}
