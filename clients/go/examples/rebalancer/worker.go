package main

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

type config struct {
	broker, token, realm, root, id string
	ttl                            time.Duration
}

// worker is one member of the fleet.
type worker struct {
	cfg     config
	log     *slog.Logger
	session *muster.Session
	member  string // the membership lease

	mu      sync.Mutex
	running map[string]context.CancelFunc // spec name → stop its work
	wg      sync.WaitGroup
}

func run(ctx context.Context, cfg config, log *slog.Logger) error {
	var opts []muster.Option
	if cfg.token != "" {
		opts = append(opts, muster.WithToken(cfg.token))
	}
	c, err := muster.New(cfg.broker, opts...)
	if err != nil {
		return err
	}
	s, err := c.NewSession(ctx, cfg.id, max(2*cfg.ttl, time.Second))
	if err != nil {
		return err
	}
	w := &worker{cfg: cfg, log: log, session: s, running: map[string]context.CancelFunc{},
		member: "lease://" + cfg.realm + "/" + cfg.root + "-members/" + cfg.id}
	defer func() {
		w.stopAll()
		_ = s.Close(context.Background())
	}()
	work, err := c.Observe(ctx, "lease://"+cfg.realm+"/"+cfg.root+"/*", muster.WithShortestTTL(cfg.ttl))
	if err != nil {
		return err
	}
	defer work.Close()
	members, err := c.Observe(ctx, "lease://"+cfg.realm+"/"+cfg.root+"-members/*", muster.WithShortestTTL(cfg.ttl))
	if err != nil {
		return err
	}
	defer members.Close()

	fleet := c.Fleet(cfg.root)
	var desired []string
	refresh := time.NewTicker(time.Second)
	defer refresh.Stop()
	for first := true; ; first = false {
		if first || len(desired) == 0 {
			desired = w.desired(ctx, fleet, desired)
		}
		w.rebalance(ctx, desired, work.View(), members.View())
		select {
		case <-ctx.Done():
			return nil
		case <-s.Done():
			return s.Err()
		case <-work.Changed():
		case <-members.Changed():
		case <-refresh.C:
			desired = w.desired(ctx, fleet, desired)
		}
	}
}

// desired reads the fleet's spec names; on an error it keeps the last ones.
func (w *worker) desired(ctx context.Context, f *muster.Fleet, last []string) []string {
	var names []string
	for s, err := range f.Desired(ctx) {
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("reading the desired set", "err", err)
			}
			return last
		}
		names = append(names, s.Name)
	}
	return names
}

// rebalance moves this worker towards its fair share. It acts only on
// ready views, and only through its own acquisitions and releases.
func (w *worker) rebalance(ctx context.Context, desired []string, work, members muster.View) {
	w.start(ctx, w.member, "") // membership: held for the worker's whole life (restarted if lost)
	if !work.Ready || !members.Ready || len(members.Items) == 0 {
		return
	}
	share := (len(desired) + len(members.Items) - 1) / len(members.Items)
	want := map[string]bool{}
	for _, n := range desired {
		want[n] = true
	}
	held := map[string]bool{}
	for _, it := range work.Items {
		held[it.Route[strings.LastIndexByte(it.Route, '/')+1:]] = true
	}

	w.mu.Lock()
	mine := make([]string, 0, len(w.running))
	for n := range w.running {
		if n != "" {
			mine = append(mine, n)
		}
	}
	w.mu.Unlock()
	slices.Sort(mine)

	// Forgotten work first, then the excess.
	var keep []string
	for _, n := range mine {
		if !want[n] {
			w.stop(n, "no longer desired")
		} else {
			keep = append(keep, n)
		}
	}
	for len(keep) > share {
		w.stop(keep[len(keep)-1], "above fair share")
		keep = keep[:len(keep)-1]
	}
	if len(keep) >= share {
		return
	}
	var free []string
	for _, n := range desired {
		if !held[n] && !slices.Contains(keep, n) {
			free = append(free, n)
		}
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	for _, n := range free[:min(len(free), share-len(keep))] {
		w.start(ctx, "lease://"+w.cfg.realm+"/"+w.cfg.root+"/"+n, n)
	}
}

// start runs the work of one lease (name "" for the membership) until it
// is stopped or lost; the SDK renews it at TTL/3 and releases it at the end.
func (w *worker) start(ctx context.Context, route, name string) {
	w.mu.Lock()
	if _, ok := w.running[name]; ok {
		w.mu.Unlock()
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	w.running[name] = cancel
	w.mu.Unlock()
	w.wg.Go(func() {
		defer func() {
			w.mu.Lock()
			delete(w.running, name)
			w.mu.Unlock()
			cancel()
		}()
		err := w.session.WithLease(wctx, route, w.cfg.ttl, func(ctx context.Context, l *muster.Lease) error {
			w.log.Info("acquired", "route", route, "fencing_token", l.FencingToken())
			<-ctx.Done() // the work itself: a real worker would do something here
			return nil
		})
		switch {
		case err == nil:
			w.log.Info("released", "route", route)
		case errors.Is(err, muster.ErrLeaseHeld):
			// Someone was faster: the view was stale by a moment.
		case errors.Is(err, muster.ErrLeaseLost):
			w.log.Warn("lost", "route", route, "err", err)
		case ctx.Err() == nil:
			w.log.Warn("acquire", "route", route, "err", err)
		}
	})
}

func (w *worker) stop(name, why string) {
	w.mu.Lock()
	cancel := w.running[name]
	w.mu.Unlock()
	if cancel != nil {
		w.log.Info("releasing", "spec", name, "why", why)
		cancel()
	}
}

// stopAll stops every lease, the membership included, and waits for the
// releases.
func (w *worker) stopAll() {
	w.mu.Lock()
	for _, cancel := range w.running {
		cancel()
	}
	w.mu.Unlock()
	w.wg.Wait()
}
