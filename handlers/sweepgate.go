package handlers

import (
	"context"
	"sync"
)

// DefaultSweepsRunning is how many sweeps validate at once, all families
// together, unless configured.
const DefaultSweepsRunning = 2

// sweepGate bounds the sweeps that validate at once: one per family, and
// Options.SweepsRunning in all. A sweep that finds its family's slot or
// every slot taken waits for one, for as long as its client does (the
// contract's admission bounds how many wait). A sweep's schema passes the
// cheap static checks (PrecheckSchema) before it queues here; it is
// compiled and validated in its slot, by a worker process (package judge).
// A family that keeps sweeping occupies one slot, never the others' turn.
type sweepGate struct {
	all chan struct{}
	mu  sync.Mutex
	fam map[string]chan struct{} // one slot per family, created when first used
}

func newSweepGate(n int) *sweepGate {
	if n <= 0 {
		n = DefaultSweepsRunning
	}
	return &sweepGate{all: make(chan struct{}, n), fam: map[string]chan struct{}{}}
}

// enter waits for the family's slot, then for a broker slot; the returned
// func gives both back. It fails with ctx's error when ctx ends first.
func (g *sweepGate) enter(ctx context.Context, family string) (func(), error) {
	g.mu.Lock()
	own := g.fam[family]
	if own == nil {
		own = make(chan struct{}, 1)
		g.fam[family] = own
	}
	g.mu.Unlock()
	select {
	case own <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case g.all <- struct{}{}:
	case <-ctx.Done():
		<-own
		return nil, ctx.Err()
	}
	return func() { <-g.all; <-own }, nil
}
