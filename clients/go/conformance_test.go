package muster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// The runner of the language-neutral scenarios in clients/conformance
// (their README describes the format), against the real broker.

type scenario struct {
	Name   string `json:"name"`
	Proves string `json:"proves"`
	Actors []struct {
		Name         string `json:"name"`
		Token        string `json:"token"`
		OwnerID      string `json:"owner_id"`
		SessionTTLMs int64  `json:"session_ttl_ms"`
	} `json:"actors"`
	Steps []step `json:"steps"`
}

type step struct {
	Op            string   `json:"op"`
	Actor         string   `json:"actor"`
	Route         string   `json:"route"`
	TTLMs         int64    `json:"ttl_ms"`
	WaitMs        int64    `json:"wait_ms"`
	Background    bool     `json:"background"`
	From          int      `json:"from"`
	Count         *int     `json:"count"`
	Holder        string   `json:"holder"`
	ExpectError   string   `json:"expect_error"`
	Observer      string   `json:"observer"`
	Observers     []string `json:"observers"`
	Within        string   `json:"within"`
	Token         string   `json:"token"`
	Selector      string   `json:"selector"`
	PageSize      int      `json:"page_size"`
	ReconcileMs   int64    `json:"reconcile_ms"`
	Jitter        *float64 `json:"jitter"`
	ShortestTTLMs int64    `json:"shortest_ttl_ms"`
	Contains      []struct {
		Route   string `json:"route"`
		OwnerID string `json:"owner_id"`
		Holder  string `json:"holder"`
	} `json:"contains"`
	Excludes     []string `json:"excludes"`
	MatchesList  bool     `json:"matches_list"`
	EpochNotMark bool     `json:"epoch_not_mark"`
	TimeoutMs    *int64   `json:"timeout_ms"`
	MaxMs        int64    `json:"max_ms"`
	Gate         string   `json:"gate"`
	On           bool     `json:"on"`
	Ms           int64    `json:"ms"`
	OpensAtLeast *int64   `json:"watch_opens_at_least"`
	OpensAtMost  *int64   `json:"watch_opens_at_most"`
	SawEvent     string   `json:"saw_event"`
}

type actor struct {
	name, token, owner string
	ttl                time.Duration
	client             *Client
	session            *Session
	mu                 sync.Mutex
	leases             map[string]*Lease
}

type run struct {
	t         *testing.T
	b         *broker
	p         *proxy
	actors    map[string]*actor
	observers map[string]*Observer
	tokens    map[string]string // observer → token
	marks     map[string]string // observer → epoch
	bg        sync.WaitGroup
}

func TestConformance(t *testing.T) {
	files, err := filepath.Glob("../conformance/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc scenario
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if sc.Proves == "" || strings.Contains(sc.Proves, "\n") {
			t.Fatalf("%s: 'proves' must be one line naming the seed requirement", f)
		}
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, sc) })
	}
}

func runScenario(t *testing.T, sc scenario) {
	b := mustStartBroker(t)
	r := &run{t: t, b: b, p: startProxy(t, b.url()), actors: map[string]*actor{},
		observers: map[string]*Observer{}, tokens: map[string]string{}, marks: map[string]string{}}
	defer r.bg.Wait()
	defer func() {
		for _, o := range r.observers {
			o.Close()
		}
	}()
	for _, a := range sc.Actors {
		ac := &actor{name: a.Name, token: a.Token, owner: a.OwnerID, ttl: time.Duration(a.SessionTTLMs) * time.Millisecond,
			client: newClient(t, b.url(), a.Token)}
		r.actors[a.Name] = ac
		r.newSession(ac)
	}
	for i, st := range sc.Steps {
		if err := r.step(st); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, st.Op, err)
		}
	}
}

func (r *run) newSession(a *actor) {
	s, err := a.client.NewSession(context.Background(), a.owner, a.ttl)
	if err != nil {
		r.t.Fatalf("session of %s: %v", a.name, err)
	}
	r.t.Cleanup(func() { _ = s.Close(context.Background()) })
	a.mu.Lock()
	a.session, a.leases = s, map[string]*Lease{}
	a.mu.Unlock()
}

func (r *run) actor(name string) (*actor, error) {
	if a := r.actors[name]; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("no actor %q", name)
}

func (r *run) observer(name string) (*Observer, error) {
	if o := r.observers[name]; o != nil {
		return o, nil
	}
	return nil, fmt.Errorf("no observer %q", name)
}

// expectErr compares an outcome with the step's expect_error.
func expectErr(err error, code string) error {
	if code == "" {
		return err
	}
	var e *Error
	if !errors.As(err, &e) || string(e.Code) != code {
		return fmt.Errorf("got %v, want error %s", err, code)
	}
	return nil
}

func (s step) timeout() time.Duration {
	if s.TimeoutMs == nil {
		return 5 * time.Second
	}
	return time.Duration(*s.TimeoutMs) * time.Millisecond
}

func (r *run) step(st step) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch st.Op {
	case "acquire":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		do := func() error {
			var opts []AcquireOption
			if st.WaitMs > 0 {
				opts = append(opts, Wait(time.Duration(st.WaitMs)*time.Millisecond))
			}
			l, err := a.session.Acquire(context.Background(), st.Route, time.Duration(st.TTLMs)*time.Millisecond, opts...)
			if err == nil {
				a.mu.Lock()
				a.leases[st.Route] = l
				a.mu.Unlock()
			}
			return expectErr(err, st.ExpectError)
		}
		if st.Background {
			r.bg.Add(1)
			go func() {
				defer r.bg.Done()
				if err := do(); err != nil {
					r.t.Errorf("background acquire of %s: %v", st.Route, err)
				}
			}()
			return nil
		}
		return do()
	case "acquire_many":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		return r.acquireMany(ctx, a, st)
	case "release", "extend":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		a.mu.Lock()
		l := a.leases[st.Route]
		a.mu.Unlock()
		if l == nil {
			return fmt.Errorf("%s holds no handle for %s", a.name, st.Route)
		}
		if st.Op == "release" {
			return expectErr(l.Release(ctx), st.ExpectError)
		}
		return expectErr(l.Extend(ctx, time.Duration(st.TTLMs)*time.Millisecond), st.ExpectError)
	case "foreign_extend", "foreign_release":
		return r.foreign(ctx, st)
	case "end_session":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		return a.session.Close(ctx)
	case "abandon_session":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		a.session.stop() // no more keepalives: the broker ends it at its TTL
		return nil
	case "new_session":
		a, err := r.actor(st.Actor)
		if err != nil {
			return err
		}
		r.newSession(a)
		return nil
	case "observe":
		return r.observe(st)
	case "wait_ready":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		wctx, wcancel := context.WithTimeout(ctx, st.timeout())
		defer wcancel()
		return o.WaitReady(wctx)
	case "expect_not_ready":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		if o.Ready() {
			return errors.New("the observer is ready")
		}
		return nil
	case "expect_view":
		return r.expectView(ctx, st)
	case "mark_epoch":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		r.marks[st.Observer] = o.View().Epoch
		return nil
	case "expect_same_view":
		return r.expectSameView(st)
	case "expect_stopped":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		select {
		case <-o.Done():
		case <-time.After(st.timeout()):
			return errors.New("the observer did not stop")
		}
		return expectErr(o.Err(), st.ExpectError)
	case "close_observer":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		maxD := time.Second
		if st.MaxMs > 0 {
			maxD = time.Duration(st.MaxMs) * time.Millisecond
		}
		start := time.Now()
		o.Close()
		if d := time.Since(start); d > maxD {
			return fmt.Errorf("Close took %v, more than %v", d, maxD)
		}
		if !errors.Is(o.Err(), ErrClosed) {
			return fmt.Errorf("err after Close: %v", o.Err())
		}
		return nil
	case "hold", "unhold", "wait_held":
		g := &r.p.pages
		switch st.Gate {
		case "list_page":
		case "watch_stream":
			g = &r.p.streams
		default:
			return fmt.Errorf("no gate %q", st.Gate)
		}
		switch st.Op {
		case "hold":
			g.hold()
		case "unhold":
			g.unhold()
		default:
			if !waitFor(st.timeout(), g.isWaiting) {
				return errors.New("nothing arrived at the gate")
			}
		}
		return nil
	case "drop_changes":
		r.p.dropping.Store(st.On)
		return nil
	case "restart_broker":
		r.b.restart(r.t)
		return nil
	case "sleep":
		time.Sleep(time.Duration(st.Ms) * time.Millisecond)
		return nil
	case "expect_proxy":
		ok := waitFor(st.timeout(), func() bool {
			n := r.p.watchOpens.Load()
			return (st.OpensAtLeast == nil || n >= *st.OpensAtLeast) &&
				(st.OpensAtMost == nil || n <= *st.OpensAtMost) &&
				(st.SawEvent == "" || r.p.sawEvent(st.SawEvent))
		})
		if !ok {
			return fmt.Errorf("proxy: %d watch opens, saw %v", r.p.watchOpens.Load(), r.p.seen)
		}
		return nil
	}
	return fmt.Errorf("unknown op %q", st.Op)
}

func (r *run) acquireMany(ctx context.Context, a *actor, st step) error {
	n := 0
	if st.Count != nil {
		n = *st.Count
	}
	idx := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range idx {
				route := strings.ReplaceAll(st.Route, "{i}", fmt.Sprint(i))
				l, err := a.session.Acquire(ctx, route, time.Duration(st.TTLMs)*time.Millisecond)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", route, err)
					return
				}
				a.mu.Lock()
				a.leases[route] = l
				a.mu.Unlock()
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
	h.mu.Lock()
	hl := h.leases[st.Route]
	h.mu.Unlock()
	if hl == nil {
		return fmt.Errorf("%s holds no handle for %s", h.name, st.Route)
	}
	rt, _ := parseRoute(st.Route)
	c := a.client
	if st.Op == "foreign_extend" {
		resp, err := c.Raw().ExtendLease(ctx, rt.realm, rt.area, rt.resource,
			extendBody(a.session.ID(), hl.FencingToken(), 60000))
		return expectErr(c.call(resp, err, 200, nil), st.ExpectError)
	}
	resp, err := c.Raw().ReleaseLease(ctx, rt.realm, rt.area, rt.resource, releaseBody(a.session.ID(), hl.FencingToken()))
	return expectErr(c.call(resp, err, 204, nil), st.ExpectError)
}

func (r *run) observe(st step) error {
	opts := []ObserveOption{}
	if st.PageSize > 0 {
		opts = append(opts, WithPageSize(st.PageSize))
	}
	if st.ReconcileMs > 0 {
		opts = append(opts, WithReconcileInterval(time.Duration(st.ReconcileMs)*time.Millisecond))
	}
	if st.Jitter != nil {
		opts = append(opts, WithReconcileJitter(*st.Jitter))
	}
	if st.ShortestTTLMs > 0 {
		opts = append(opts, WithShortestTTL(time.Duration(st.ShortestTTLMs)*time.Millisecond))
	}
	o, err := newClient(r.t, r.p.url(), st.Token).Observe(context.Background(), st.Selector, opts...)
	if err != nil {
		return err
	}
	r.observers[st.Observer] = o
	r.tokens[st.Observer] = st.Token
	return nil
}

// viewProblem says why v does not satisfy st, "" when it does.
func (r *run) viewProblem(ctx context.Context, st step, o *Observer, v View) string {
	if !v.Ready {
		return fmt.Sprintf("not ready (%v)", o.Err())
	}
	byRoute := map[string]Item{}
	for _, it := range v.Items {
		byRoute[it.Route] = it
	}
	if st.Count != nil && len(v.Items) != *st.Count {
		return fmt.Sprintf("%d items, want %d", len(v.Items), *st.Count)
	}
	for _, c := range st.Contains {
		it, ok := byRoute[c.Route]
		if !ok {
			return "missing " + c.Route
		}
		if c.OwnerID != "" && it.OwnerID != c.OwnerID {
			return fmt.Sprintf("%s held by %s, want %s", c.Route, it.OwnerID, c.OwnerID)
		}
		if c.Holder != "" {
			h, err := r.actor(c.Holder)
			if err != nil {
				return err.Error()
			}
			if it.HolderIncarnation != h.session.HolderIncarnation() {
				return fmt.Sprintf("%s not held by %s's current session", c.Route, c.Holder)
			}
		}
	}
	for _, route := range st.Excludes {
		if _, ok := byRoute[route]; ok {
			return "still has " + route
		}
	}
	if st.EpochNotMark && v.Epoch == r.marks[st.Observer] {
		return "still in the marked epoch " + v.Epoch
	}
	if st.MatchesList {
		c := newClient(r.t, r.b.url(), r.tokens[st.Observer])
		var listed []string
		for it, err := range c.List(ctx, o.Selector(), ListOptions{Limit: 500}) {
			if err != nil {
				return "list: " + err.Error()
			}
			listed = append(listed, it.Route+"@"+it.HolderIncarnation)
		}
		var viewed []string
		for _, it := range v.Items {
			viewed = append(viewed, it.Route+"@"+it.HolderIncarnation)
		}
		slices.Sort(listed)
		slices.Sort(viewed)
		if !slices.Equal(listed, viewed) {
			return fmt.Sprintf("view (%d items) differs from LIST (%d items)", len(viewed), len(listed))
		}
	}
	return ""
}

func (r *run) expectView(ctx context.Context, st step) error {
	o, err := r.observer(st.Observer)
	if err != nil {
		return err
	}
	deadline := time.After(st.timeout())
	for {
		ch := o.Changed()
		problem := r.viewProblem(ctx, st, o, o.View())
		if problem == "" {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond): // LIST may lag the view
		case <-deadline:
			return errors.New(problem)
		}
	}
}

func (r *run) expectSameView(st step) error {
	if len(st.Observers) != 2 {
		return errors.New("expect_same_view compares two observers")
	}
	views := make([][]string, 2)
	ok := waitFor(st.timeout(), func() bool {
		for i, name := range st.Observers {
			o, err := r.observer(name)
			if err != nil {
				return false
			}
			v := o.View()
			if !v.Ready {
				return false
			}
			views[i] = nil
			for _, it := range v.Items {
				if matchSelector(st.Within, it.Route) {
					views[i] = append(views[i], it.Route+"@"+it.HolderIncarnation)
				}
			}
		}
		return slices.Equal(views[0], views[1])
	})
	if !ok {
		return fmt.Errorf("views differ:\n%v\n%v", views[0], views[1])
	}
	return nil
}

// matchSelector is the selector grammar's matching, for the runner only.
func matchSelector(sel, route string) bool {
	s := strings.Split(strings.TrimPrefix(sel, "lease://"), "/")
	r := strings.Split(strings.TrimPrefix(route, "lease://"), "/")
	var match func(s, r []string) bool
	match = func(s, r []string) bool {
		if len(s) == 0 {
			return len(r) == 0
		}
		if s[0] == "**" {
			for i := 0; i <= len(r); i++ {
				if match(s[1:], r[i:]) {
					return true
				}
			}
			return false
		}
		return len(r) > 0 && (s[0] == "*" || s[0] == r[0]) && match(s[1:], r[1:])
	}
	return match(s, r)
}

func extendBody(session string, token, ttlMs int64) api.ExtendRequest {
	return api.ExtendRequest{SessionId: session, FencingToken: token, TtlMs: ttlMs}
}

func releaseBody(session string, token int64) api.ReleaseRequest {
	return api.ReleaseRequest{SessionId: session, FencingToken: token}
}
