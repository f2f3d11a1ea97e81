package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// TestRollingRestartKeepsSessions restarts each of three brokers in turn
// (SIGTERM, then the same broker id again) under Go SDK workers that hold
// a lease each in two families and extend it every 50 ms, and an observer
// per family. Every move of a family is planned (the stop hands it over,
// the rejoin takes families back by rebalance), so no session and no lease
// may be lost, and the view of every observer ends complete. It reports
// the latency of the extends across the restarts: a planned move pauses a
// client, it does not fail it.
func TestRollingRestartKeepsSessions(t *testing.T) {
	fams := []string{"acme", "beta"}
	c := newCluster(t, 3, fams...)
	for _, f := range fams {
		c.waitSettled(f, c.brokers, 20*time.Second)
	}
	urls := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		urls[i] = b.url
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const workers = 3
	var mu sync.Mutex
	var lat []time.Duration
	var failures []string
	var wg sync.WaitGroup
	var leases []*muster.Lease
	var sessions []*muster.Session
	for _, f := range fams {
		cl, err := muster.New(strings.Join(urls, ","), muster.WithToken(secret(f)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range workers {
			s, err := cl.NewSession(ctx, fmt.Sprintf("w%d", i), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.Acquire(ctx, fmt.Sprintf("lease://r/a/job-%d", i), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			sessions, leases = append(sessions, s), append(leases, l)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					t0 := time.Now()
					err := l.Extend(ctx, 3*time.Second)
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					if err != nil && ctx.Err() == nil {
						failures = append(failures, fmt.Sprintf("%s %s at %s: %v", f, l.Route(), t0.Format("15:04:05.000"), err))
					}
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
	}
	observers := map[string]*muster.Observer{}
	for _, f := range fams {
		cl, err := muster.New(strings.Join(urls, ","), muster.WithToken(secret(f)))
		if err != nil {
			t.Fatal(err)
		}
		obs, err := cl.Observe(context.Background(), "lease://r/**")
		if err != nil {
			t.Fatal(err)
		}
		defer obs.Close()
		observers[f] = obs
	}

	live := slices.Clone(c.brokers)
	for i := range 3 {
		old := live[0]
		old.term(t)
		live = append(without(live, old), c.restart(old))
		for _, f := range fams {
			c.waitSettled(f, live, 20*time.Second)
		}
		t.Logf("restart %d (%s) done", i+1, old.id)
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()

	for _, s := range sessions {
		if err := s.Err(); err != nil {
			t.Errorf("session lost: %v", err)
		}
	}
	for _, l := range leases {
		if err := l.Err(); err != nil {
			t.Errorf("lease %s lost: %v", l.Route(), err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Errorf("extend failed: %s", f)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Millisecond) }
	t.Logf("%d extends across 3 rolling restarts: p50 %v, p99 %v, max %v", len(lat), q(.5), q(.99), lat[len(lat)-1].Round(time.Millisecond))
	for _, f := range fams {
		obs := observers[f]
		deadline := time.Now().Add(10 * time.Second)
		for {
			v := obs.View()
			if v.Ready && len(v.Items) == workers {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("observer of %s: ready %v with %d items, want %d", f, v.Ready, len(v.Items), workers)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
