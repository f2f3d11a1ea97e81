package sse

import (
	"sync"
	"time"
)

// DefaultMaxHold is how long a writer may hold a Gate's pass before the
// next writer waiting is let through anyway.
const DefaultMaxHold = 2 * time.Millisecond

// Gate bounds how many stream writers write at once, across every stream
// served with it (Options.Gate).
//
// Without a gate, a change offered to 10,000 streams wakes 10,000 writers at
// once: each writes its one event with a system call of its own, and the
// run queue they form delays every other goroutine (the requests that make
// the changes among them). With a gate, a woken writer whose stream fell
// behind (its last batch carried more than one event) waits for a pass
// before it takes its next batch from the queue, and gives the pass back
// after its flush. While it waits its events accumulate, so under load each
// write carries all the events that arrived since the stream's last turn,
// and at most the gate's capacity of such writers compete for the
// processors. A stream that keeps up (one event a batch) does not ask for a
// pass at all, and when few streams are busy a pass is free at once.
//
// Passes are granted in the order they were asked for. A writer blocked in
// a write (a client that stopped reading fills its socket buffer) keeps its
// pass for about MaxHold (at most one and a half): then the next waiting
// writer is let through as if it had been given back, so a stalled client
// delays the others by about MaxHold, and is itself cut off by its write deadline as before.
// The gate never changes what a stream writes or in which order, only when.
type Gate struct {
	mu       sync.Mutex
	free     int
	waiting  []*pass // FIFO; waiting[0] is next
	held     []*pass // passes granted and not given back or overtaken
	watching bool    // a goroutine is watching held passes for MaxHold
	maxHold  time.Duration
	overtook uint64 // passes handed on after MaxHold
}

// Overtaken is how many passes were handed on because their holder kept
// them longer than MaxHold (a write blocked on a slow client, or a writer
// that got no processor for that long).
func (g *Gate) Overtaken() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.overtook
}

// NewGate returns a gate that lets n writers write at once (at least 1),
// overtaking a pass held longer than maxHold (DefaultMaxHold if not
// positive).
func NewGate(n int, maxHold time.Duration) *Gate {
	if maxHold <= 0 {
		maxHold = DefaultMaxHold
	}
	return &Gate{free: max(n, 1), maxHold: maxHold}
}

// pass is one writer's claim on a gate; a writer reuses its own.
type pass struct {
	ready chan struct{} // one slot: the pass was granted
	since time.Time     // when it was granted
	at    int           // index in held while held, else -1
}

func newPass() *pass { return &pass{ready: make(chan struct{}, 1), at: -1} }

// enter blocks until p is granted.
func (g *Gate) enter(p *pass) {
	g.mu.Lock()
	if g.free > 0 {
		g.free--
		g.grant(p, time.Now())
		g.mu.Unlock()
		return
	}
	g.waiting = append(g.waiting, p)
	if !g.watching {
		g.watching = true
		go g.watch()
	}
	g.mu.Unlock()
	<-p.ready
}

// leave gives p back: to the writer waiting longest, if any. A pass that
// was overtaken (held longer than MaxHold) was already handed on.
func (g *Gate) leave(p *pass) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.at < 0 {
		return
	}
	g.drop(p)
	if len(g.waiting) == 0 {
		g.free++
		return
	}
	g.handOn(time.Now())
}

// grant records p as held since now. Callers hold g.mu.
func (g *Gate) grant(p *pass, now time.Time) {
	p.since = now
	p.at = len(g.held)
	g.held = append(g.held, p)
}

// drop removes p from held. Callers hold g.mu.
func (g *Gate) drop(p *pass) {
	last := len(g.held) - 1
	g.held[p.at] = g.held[last]
	g.held[p.at].at = p.at
	g.held[last] = nil
	g.held = g.held[:last]
	p.at = -1
}

// handOn grants a pass to the writer waiting longest. Callers hold g.mu
// and know one is waiting.
func (g *Gate) handOn(now time.Time) {
	next := g.waiting[0]
	g.waiting[0] = nil
	g.waiting = g.waiting[1:]
	if len(g.waiting) == 0 {
		g.waiting = g.waiting[:0:0] // let the backing array go
	}
	g.grant(next, now)
	next.ready <- struct{}{}
}

// watch runs while writers wait: every half MaxHold (at most every 10 ms)
// it hands on the passes held longer than MaxHold.
func (g *Gate) watch() {
	tick := min(g.maxHold/2, 10*time.Millisecond)
	for {
		time.Sleep(tick)
		g.mu.Lock()
		if len(g.waiting) == 0 {
			g.watching = false
			g.mu.Unlock()
			return
		}
		now := time.Now()
		for i := 0; i < len(g.held) && len(g.waiting) > 0; {
			if p := g.held[i]; now.Sub(p.since) > g.maxHold {
				g.drop(p) // moves the last held pass to i
				g.handOn(now)
				g.overtook++
				continue
			}
			i++
		}
		g.mu.Unlock()
	}
}
