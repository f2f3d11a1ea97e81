package muster

import (
	"time"
)

// Recovery backoff of the observer: 50 ms doubling to 2 s, jittered.
const (
	recoverMin = 50 * time.Millisecond
	recoverMax = 2 * time.Second
	// maxBuffered bounds the changes an observer buffers while it pages a
	// snapshot; beyond it the bootstrap starts over.
	maxBuffered = 100_000
)

// ObserveOption configures Observe. Invalid values make Observe fail.
type ObserveOption func(*observeConfig)

type observeConfig struct {
	shortestTTL time.Duration
	interval    time.Duration
	jitter      float64
	pageSize    int
	errs        []string
	broken      brokenMode // the conformance tests' deliberate faults; 0 in production
}

// WithShortestTTL tells the observer the shortest lease TTL the observed
// fleet uses; the default reconciliation interval is derived from it
// (ReconcileInterval). Must not be negative; 0 means unknown.
func WithShortestTTL(d time.Duration) ObserveOption {
	return func(c *observeConfig) {
		if d < 0 {
			c.errs = append(c.errs, "the shortest TTL must not be negative")
		}
		c.shortestTTL = d
	}
}

// WithReconcileInterval sets the periodic reconciliation interval instead of
// the default formula. Must be at least 10 ms.
func WithReconcileInterval(d time.Duration) ObserveOption {
	return func(c *observeConfig) {
		if d < 10*time.Millisecond {
			c.errs = append(c.errs, "the reconciliation interval must be at least 10ms")
		}
		c.interval = d
	}
}

// WithReconcileJitter sets the jitter of the reconciliation interval as a
// fraction: each period is drawn uniformly from interval·[1-j, 1+j]. Must be
// in [0, 1); the default is DefaultReconcileJitter (0.2). 0 makes every
// period exact (tests); a fleet should keep some jitter so that its
// observers do not relist in lockstep.
func WithReconcileJitter(j float64) ObserveOption {
	return func(c *observeConfig) {
		if !(j >= 0 && j < 1) {
			c.errs = append(c.errs, "the reconciliation jitter must be in [0, 1)")
		}
		c.jitter = j
	}
}

// WithPageSize sets the LIST page size used to read the rest of a snapshot,
// 1..500 (default 500).
func WithPageSize(n int) ObserveOption {
	return func(c *observeConfig) {
		if n < 1 || n > 500 {
			c.errs = append(c.errs, "the page size must be in 1..500")
		}
		c.pageSize = n
	}
}
