package muster

import (
	"math/rand/v2"
	"time"
)

// backoff doubles from lo to hi; each delay is jittered into [d/2, d).
type backoff struct {
	lo, hi, cur time.Duration
}

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{lo: lo, hi: hi, cur: lo} }

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.hi)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = b.lo }

// The periodic reconciliation default: clamp(shortest expected lease TTL / 2,
// MinReconcile, MaxReconcile), MaxReconcile when the TTL is unknown, with
// ±DefaultReconcileJitter. README.md gives the evidence for the bounds.
const (
	MinReconcile           = 5 * time.Second
	MaxReconcile           = 60 * time.Second
	DefaultReconcileJitter = 0.2
)

// ReconcileInterval is the recommended reconciliation interval for a fleet
// whose shortest lease TTL is shortestTTL (0: unknown).
func ReconcileInterval(shortestTTL time.Duration) time.Duration {
	if shortestTTL <= 0 {
		return MaxReconcile
	}
	return min(max(shortestTTL/2, MinReconcile), MaxReconcile)
}

// jittered spreads d uniformly over d·[1-j, 1+j].
func jittered(d time.Duration, j float64) time.Duration {
	if j == 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + j*(2*rand.Float64()-1)))
}
