package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/clients/go/api"
)

// run is the state of the loaded scenario: its actors, the watch streams
// they opened, and the background steps still running.
type run struct {
	ctx     context.Context // ends at the next reset
	cancel  context.CancelFunc
	actors  map[string]*actor
	watches map[string][]*muster.Subscription

	bg     sync.WaitGroup
	bgMu   sync.Mutex
	bgErrs []string // failures of background steps not reported yet
}

func newRun() *run {
	ctx, cancel := context.WithCancel(context.Background())
	return &run{ctx: ctx, cancel: cancel, actors: map[string]*actor{}, watches: map[string][]*muster.Subscription{}}
}

// stop ends everything the run started, without a request to the broker.
func (r *run) stop() {
	r.cancel()
	for _, subs := range r.watches {
		for _, s := range subs {
			_ = s.Close()
		}
	}
	for _, a := range r.actors {
		a.stop()
	}
	r.bg.Wait()
}

func (r *run) actor(name string) (*actor, error) {
	if a := r.actors[name]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("no actor %q", name)
}

// background runs f after the step answered; a failure is reported by the
// next step (or wait_background).
func (r *run) background(what string, f func() error) {
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		if err := f(); err != nil && r.ctx.Err() == nil {
			r.bgMu.Lock()
			r.bgErrs = append(r.bgErrs, what+": "+err.Error())
			r.bgMu.Unlock()
		}
	}()
}

// backgroundFailures returns and forgets the unreported background failures.
func (r *run) backgroundFailures() string {
	r.bgMu.Lock()
	defer r.bgMu.Unlock()
	s := strings.Join(r.bgErrs, "; ")
	r.bgErrs = nil
	return s
}

// step runs one harness op. The error is the step's failure: what was
// expected and what was seen.
func (h *harness) step(ctx context.Context, st step) error {
	r := h.run
	switch st.Op {
	case "acquire":
		return h.acquire(ctx, st)
	case "acquire_many":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		return acquireMany(ctx, a, st)
	case "release", "extend":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		l := a.lease(st.Route)
		if l == nil {
			return fmt.Errorf("%s holds no handle for %s", a.name, st.Route)
		}
		if st.Op == "release" {
			return expectErr(l.Release(ctx), st.ExpectError)
		}
		return expectErr(l.Extend(ctx, ms(st.TTLMs)), st.ExpectError)
	case "foreign_extend", "foreign_release":
		return r.foreign(ctx, st)
	case "end_session", "abandon_session", "new_session":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		switch st.Op {
		case "end_session":
			_, s := a.current()
			return s.Close(ctx)
		case "abandon_session":
			a.abandon()
			return nil
		}
		return a.newSession(ctx, h.actorTransport)
	case "hold", "unhold", "wait_held":
		return h.gateStep(ctx, st)
	case "drop_changes":
		h.proxy.dropping.Store(st.On)
		return nil
	case "restart_broker":
		return h.restartStep(st)
	case "sleep":
		return sleep(ctx, ms(st.Ms))
	case "expect_proxy":
		p := h.proxy
		ok := waitFor(ctx, st.timeout(), func() bool {
			n := p.watchOpens.Load()
			return (st.OpensAtLeast == nil || n >= *st.OpensAtLeast) &&
				(st.OpensAtMost == nil || n <= *st.OpensAtMost) &&
				(st.SawEvent == "" || p.sawEvent(st.SawEvent))
		})
		if !ok {
			return fmt.Errorf("want watch opens in [%s, %s] and event %q; proxy saw %s",
				optInt(st.OpensAtLeast), optInt(st.OpensAtMost), st.SawEvent, p.counts())
		}
		return nil
	case "wait_background":
		done := make(chan struct{})
		go func() { r.bg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(st.timeout()):
			return errors.New("background steps still running")
		case <-ctx.Done():
			return ctx.Err()
		}
		if f := r.backgroundFailures(); f != "" {
			return errors.New(f)
		}
		return nil
	case "actor_watch":
		return r.actorWatch(st)
	case "expect_watch_end", "expect_watch_open":
		return r.expectWatch(ctx, st)
	case "kill_broker", "wait_owner", "cut_store", "heal_store":
		return h.placementStep(ctx, st)
	case "move":
		return h.moveStep(ctx, st)
	}
	return errUnknownOp
}

var errUnknownOp = errors.New("unknown op")

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *harness) acquire(ctx context.Context, st step) error {
	a, err := h.run.actor(st.Actor)
	if err != nil {
		return err
	}
	do := func(ctx context.Context) error {
		var opts []muster.AcquireOption
		if st.WaitMs > 0 {
			opts = append(opts, muster.Wait(ms(st.WaitMs)))
		}
		_, s := a.current()
		l, err := s.Acquire(ctx, st.Route, ms(st.TTLMs), opts...)
		if err == nil {
			a.keep(st.Route, l)
		}
		return expectErr(err, st.ExpectError)
	}
	if st.Background {
		h.run.background("background acquire of "+st.Route+" by "+a.name, func() error { return do(h.run.ctx) })
		return nil
	}
	return do(ctx)
}

// acquireMany acquires the route template for every index, 8 at a time.
func acquireMany(ctx context.Context, a *actor, st step) error {
	n := 0
	if st.Count != nil {
		n = *st.Count
	}
	_, s := a.current()
	idx := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range idx {
				route := strings.ReplaceAll(st.Route, "{i}", fmt.Sprint(i))
				l, err := s.Acquire(ctx, route, ms(st.TTLMs))
				if err != nil {
					errs <- fmt.Errorf("%s: %w", route, err)
					return
				}
				a.keep(route, l)
			}
		})
	}
	var err error
feed:
	for i := st.From; i < st.From+n; i++ {
		select {
		case idx <- i:
		case err = <-errs:
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// foreign makes an actor extend or release another actor's lease with the
// holder's real fencing token and its own session: the broker must refuse.
func (r *run) foreign(ctx context.Context, st step) error {
	a, err := r.actor(st.Actor)
	if err != nil {
		return err
	}
	h, err := r.actor(st.Holder)
	if err != nil {
		return err
	}
	hl := h.lease(st.Route)
	if hl == nil {
		return fmt.Errorf("%s holds no handle for %s", h.name, st.Route)
	}
	parts := strings.Split(strings.TrimPrefix(st.Route, "lease://"), "/")
	if len(parts) != 3 {
		return fmt.Errorf("%q is not an exact lease route", st.Route)
	}
	c, s := a.current()
	realm, area, res := api.Realm(parts[0]), api.Area(parts[1]), api.Resource(parts[2])
	if st.Op == "foreign_extend" {
		resp, err := c.Raw().ExtendLease(ctx, realm, area, res,
			api.ExtendRequest{SessionId: s.ID(), FencingToken: hl.FencingToken(), TtlMs: 60000})
		return expectErr(answer(resp, err, 200), st.ExpectError)
	}
	resp, err := c.Raw().ReleaseLease(ctx, realm, area, res,
		api.ReleaseRequest{SessionId: s.ID(), FencingToken: hl.FencingToken()})
	return expectErr(answer(resp, err, 204), st.ExpectError)
}

func (h *harness) gateStep(ctx context.Context, st step) error {
	var g *gate
	switch st.Gate {
	case "list_page":
		g = &h.proxy.pages
	case "watch_stream":
		g = &h.proxy.streams
	default:
		return fmt.Errorf("no gate %q (want list_page or watch_stream)", st.Gate)
	}
	switch st.Op {
	case "hold":
		g.hold()
	case "unhold":
		g.unhold()
	default:
		if !waitFor(ctx, st.timeout(), g.isWaiting) {
			return fmt.Errorf("nothing arrived at the %s gate within %v", st.Gate, st.timeout())
		}
	}
	return nil
}
