package placement

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// TestPlannedMovePauses measures what a planned move costs a client, with
// the broker's default timing: three brokers, Go SDK workers extending a
// lease every 20 ms, and the family moved to the next broker by
// POST /v1/placement/move, round after round. A move's pause is the
// longest extend that started between the move request and one second
// after the new owner served the family. No session, lease or extend may
// be lost. Long: it runs only with MUSTER_PLACEMENT_LONG=1
// (MUSTER_PLACEMENT_ROUNDS moves, 20 by default; figures in BENCHMARKS.md).
func TestPlannedMovePauses(t *testing.T) {
	if os.Getenv("MUSTER_PLACEMENT_LONG") == "" {
		t.Skip("long: set MUSTER_PLACEMENT_LONG=1 to measure planned moves with the default timing")
	}
	rounds := 20
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PLACEMENT_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	c := newClusterTimed(t, defaults, 3, "acme")
	c.waitSettled("acme", c.brokers, 30*time.Second)
	urls := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		urls[i] = b.url
	}
	cl, err := muster.New(strings.Join(urls, ","), muster.WithToken(secret("acme")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type extend struct {
		at  time.Time
		d   time.Duration
		err error
	}
	var mu sync.Mutex
	var calls []extend
	var leases []*muster.Lease
	var wg sync.WaitGroup
	for i := range 4 {
		s, err := cl.NewSession(ctx, fmt.Sprintf("w%d", i), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Acquire(ctx, fmt.Sprintf("lease://r/a/job-%d", i), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				err := l.Extend(ctx, 5*time.Second)
				if ctx.Err() != nil {
					return // cancelled at the end: not a failure
				}
				mu.Lock()
				calls = append(calls, extend{t0, time.Since(t0), err})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	type window struct{ from, to time.Time }
	var moves []window
	var took []time.Duration
	for round := range rounds {
		owner := c.waitOwner("acme", c.brokers, 30*time.Second)
		to := c.brokers[(slices.Index(c.brokers, owner)+1)%len(c.brokers)]
		start := time.Now()
		if a, err := call(owner.url, "acme", "POST", "/v1/placement/move", map[string]any{"to": to.id}); err != nil || a.status != 202 {
			t.Fatalf("round %d: move: %d %v %v", round, a.status, a.body, err)
		}
		if o := c.waitOwner("acme", c.brokers, 30*time.Second); o != to {
			t.Fatalf("round %d: the family is on %s, moved to %s", round, o.id, to.id)
		}
		took = append(took, time.Since(start))
		moves = append(moves, window{start, time.Now().Add(time.Second)})
		time.Sleep(2 * time.Second)
	}
	cancel()
	wg.Wait()
	for _, l := range leases {
		if err := l.Err(); err != nil {
			t.Errorf("lease %s lost: %v", l.Route(), err)
		}
	}
	var pauses []time.Duration
	failed := 0
	for _, w := range moves {
		var worst time.Duration
		for _, c := range calls {
			if !c.at.Before(w.from) && c.at.Before(w.to) {
				worst = max(worst, c.d)
			}
		}
		pauses = append(pauses, worst)
	}
	for _, c := range calls {
		if c.err != nil {
			t.Logf("extend at %s failed: %v", c.at.Format("15:04:05.000"), c.err)
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d extends failed", failed)
	}
	slices.Sort(pauses)
	slices.Sort(took)
	q := func(ds []time.Duration, p float64) time.Duration {
		return ds[int(p*float64(len(ds)-1))].Round(time.Millisecond)
	}
	t.Logf("%d planned moves, %d extends: pause p50 %v, p99 %v, max %v; move request to the new owner serving: p50 %v, max %v",
		rounds, len(calls), q(pauses, .5), q(pauses, .99), pauses[len(pauses)-1].Round(time.Millisecond), q(took, .5), took[len(took)-1].Round(time.Millisecond))
}
