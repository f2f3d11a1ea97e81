package muster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// View is a copy of an observer's view.
type View struct {
	// Ready is true once a bootstrap completed, until the next event that
	// may have made the view stale (then Items is the last known state).
	Ready    bool
	Epoch    string // the broker lifetime the items belong to
	Revision int64  // the broker revision the items are at
	Items    []Item // sorted by Route
}

// ObserverStats counts what an observer did.
type ObserverStats struct {
	Attempts        int64 // bootstraps started
	Bootstraps      int64 // bootstraps that completed and installed a view
	Recoveries      int64 // times the view became not ready
	Reconciliations int64 // periodic reconciliations started
}

// Observer keeps an advisory view of the held leases matching one selector:
// it owns the bootstrap (open a watch stream and read its marker, buffer the
// changes, page the rest of the marker's snapshot, install it, apply the
// buffered changes newer than the marker, then report ready) and every
// recovery. See Observe.
type Observer struct {
	c        *Client
	selector string
	interval time.Duration
	jitter   float64
	pageSize int
	broken   brokenMode

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	items    map[string]Item
	ready    bool
	epoch    string
	revision int64
	err      error
	stopErr  error // why the observer is being stopped: ErrClosed or a fatal error
	closed   bool
	changed  chan struct{}
	stats    ObserverStats
}

// Observe starts an observer of selector and returns at once; use WaitReady
// or Ready and Changed to learn when its view is usable.
//
// The view is advisory: it can be stale at any moment, and it never grants
// anything (its items are plain values; only Session.Acquire makes a Lease).
// It becomes not ready, and a fresh bootstrap starts at once, when the
// stream ends for any reason: overflow (this process read too slowly),
// supersede, a dropped connection, a broker restart (a new epoch: the new
// view replaces the old one entirely). Failed bootstraps are retried with
// backoff from 50 ms doubling to 2 s, jittered; only one bootstrap runs at
// a time. While ready, the observer also re-bootstraps in the background
// every reconciliation interval (by default clamp(shortest TTL / 2, 5 s,
// 60 s) ±20%), replacing the view when the new one is installed, because
// changes are hints that a broker does not replay.
//
// An error no retry can fix (ErrInvalidSelector, ErrForbidden,
// ErrUnauthenticated, ErrNotFound, ErrNotImplemented, …) stops the observer;
// Done is then closed and Err says why. ctx bounds the observer's life like
// Close.
func (c *Client) Observe(ctx context.Context, selector string, opts ...ObserveOption) (*Observer, error) {
	cfg := observeConfig{jitter: DefaultReconcileJitter, pageSize: 500}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, &Error{Code: ErrInvalidRequest.Code, Detail: "Observe: " + strings.Join(cfg.errs, "; ")}
	}
	if cfg.interval == 0 {
		cfg.interval = ReconcileInterval(cfg.shortestTTL)
	}
	octx, cancel := context.WithCancel(ctx)
	o := &Observer{
		c: c, selector: selector, interval: cfg.interval, jitter: cfg.jitter, pageSize: cfg.pageSize, broken: cfg.broken,
		cancel: cancel, done: make(chan struct{}), items: map[string]Item{}, changed: make(chan struct{}),
	}
	go o.run(octx)
	return o, nil
}

// Selector is the observed selector.
func (o *Observer) Selector() string { return o.selector }

// ReconcileEvery is the (unjittered) periodic reconciliation interval.
func (o *Observer) ReconcileEvery() time.Duration { return o.interval }

// View returns a copy of the current view.
func (o *Observer) View() View {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := View{Ready: o.ready, Epoch: o.epoch, Revision: o.revision, Items: make([]Item, 0, len(o.items))}
	for _, it := range o.items {
		v.Items = append(v.Items, it)
	}
	slices.SortFunc(v.Items, func(a, b Item) int { return strings.Compare(a.Route, b.Route) })
	return v
}

// Ready reports whether the view is bootstrapped and followed live.
func (o *Observer) Ready() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ready
}

// Changed returns a channel that is closed at the next change of the view,
// of its readiness or of Err. Call it again for the change after that.
func (o *Observer) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// Err is nil while the view is ready. Otherwise it is why the view is not
// ready: the end of the stream, or the last failed bootstrap; once the
// observer stopped, why it stopped (ErrClosed after Close).
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Done is closed when the observer has stopped.
func (o *Observer) Done() <-chan struct{} { return o.done }

// Stats counts bootstraps, recoveries and reconciliations.
func (o *Observer) Stats() ObserverStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// WaitReady waits until the view is ready, the observer stops (its Err is
// returned) or ctx ends.
func (o *Observer) WaitReady(ctx context.Context) error {
	for {
		o.mu.Lock()
		ready, ch, closed, err := o.ready, o.changed, o.closed, o.err
		o.mu.Unlock()
		if ready {
			return nil
		}
		if closed {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the observer and waits for it: its stream is closed and any
// request in flight is cancelled, so Close returns promptly even while the
// broker hangs. Err is ErrClosed afterwards.
func (o *Observer) Close() error {
	o.mu.Lock()
	if o.stopErr == nil {
		o.stopErr = ErrClosed
	}
	o.mu.Unlock()
	o.cancel()
	<-o.done
	return nil
}

// notify wakes the Changed waiters; o.mu is held.
func (o *Observer) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// bootResult is the outcome of one bootstrap.
type bootResult struct {
	sub      *Subscription
	items    map[string]Item
	epoch    string
	revision int64
	err      error
}

// run is the observer's single goroutine: it owns the current stream and
// starts at most one bootstrap at a time.
func (o *Observer) run(ctx context.Context) {
	defer close(o.done)
	var (
		cur       *Subscription
		events    <-chan Change
		pending   chan bootResult
		readyAt   time.Time
		bo        = newBackoff(recoverMin, recoverMax)
		retry     = time.NewTimer(0) // the first bootstrap starts at once
		reconcile = time.NewTimer(time.Hour)
	)
	reconcile.Stop()
	defer func() {
		retry.Stop()
		reconcile.Stop()
		if pending != nil {
			if r := <-pending; r.sub != nil {
				r.sub.Close()
			}
		}
		if cur != nil {
			cur.Close()
		}
		o.stop(context.Cause(ctx))
		o.cancel()
	}()
	start := func() {
		pending = make(chan bootResult, 1)
		o.mu.Lock()
		o.stats.Attempts++
		o.mu.Unlock()
		go func(p chan<- bootResult) { p <- o.bootstrap(ctx) }(pending)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if pending == nil {
				start()
			}
		case <-reconcile.C:
			if pending == nil {
				o.mu.Lock()
				o.stats.Reconciliations++
				o.mu.Unlock()
				start()
			}
		case ch, ok := <-events:
			if ok {
				o.apply(ch)
				continue
			}
			err := cur.Err()
			cur, events = nil, nil
			if o.broken&brokenStayReady != 0 {
				continue
			}
			reconcile.Stop()
			o.notReady(err)
			if pending == nil {
				if time.Since(readyAt) >= recoverMax {
					bo.reset() // it was stable: recover at once
					retry.Reset(0)
				} else {
					retry.Reset(bo.next())
				}
			}
		case r := <-pending:
			pending = nil
			if ctx.Err() != nil {
				if r.sub != nil {
					r.sub.Close()
				}
				return
			}
			if r.err != nil {
				if observerFatal(r.err) && o.broken&brokenRetryFatal == 0 {
					o.mu.Lock()
					if o.stopErr == nil {
						o.stopErr = r.err
					}
					o.mu.Unlock()
					return
				}
				if cur == nil {
					o.notReady(r.err)
				}
				retry.Reset(bo.next())
				continue
			}
			if cur != nil {
				cur.Close()
			}
			cur, events = r.sub, r.sub.Events()
			o.install(r)
			readyAt = time.Now()
			if o.broken&brokenNoReconcile == 0 {
				reconcile.Reset(jittered(o.interval, o.jitter))
			}
		}
	}
}

// observerFatal reports errors that no retry fixes.
func observerFatal(err error) bool {
	for _, e := range []error{ErrInvalidSelector, ErrInvalidRequest, ErrUnauthenticated, ErrForbidden,
		ErrNotFound, ErrMethodNotAllowed, ErrNotImplemented} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// bootstrap opens a stream, pages the rest of its marker's snapshot while
// buffering the stream's changes, and builds the view. On success the
// stream stays open for the caller.
func (o *Observer) bootstrap(ctx context.Context) bootResult {
	sub, err := o.c.Watch(ctx, o.selector)
	if err != nil {
		return bootResult{err: err}
	}
	m := sub.Marker()
	if len(m.Selectors) != 1 {
		sub.Close()
		return bootResult{err: fmt.Errorf("muster: the marker has %d subscriptions, want 1", len(m.Selectors))}
	}
	items := make(map[string]Item, len(m.Selectors[0].Items))
	for _, it := range m.Selectors[0].Items {
		items[it.Route] = it
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pages := make(chan bootResult, 1)
	go func() { pages <- o.pageRest(pctx, m, items) }()
	var buf []Change
	for {
		select {
		case ch, ok := <-sub.Events():
			if !ok {
				pcancel()
				<-pages
				return bootResult{err: sub.Err()}
			}
			if buf = append(buf, ch); len(buf) > maxBuffered {
				pcancel()
				<-pages
				sub.Close()
				return bootResult{err: fmt.Errorf("muster: more than %d changes while paging a snapshot", maxBuffered)}
			}
		case r := <-pages:
			if r.err != nil {
				sub.Close()
				return r
			}
			if o.broken&brokenIgnoreSnapshot != 0 {
				clear(items)
			}
			if o.broken&brokenDropBuffered != 0 {
				buf = nil
			}
			rev := m.Revision
			for _, ch := range buf {
				if ch.Revision > m.Revision {
					o.applyTo(items, ch)
					rev = max(rev, ch.Revision)
				}
			}
			return bootResult{sub: sub, items: items, epoch: m.Epoch, revision: rev}
		}
	}
}

// pageRest reads the rest of the marker's snapshot into items (owned by
// the caller only once pageRest returned).
func (o *Observer) pageRest(ctx context.Context, m Marker, items map[string]Item) bootResult {
	cursor := m.Selectors[0].NextCursor
	if o.broken&brokenUncancellablePages != 0 {
		ctx = context.WithoutCancel(ctx)
	}
	for cursor != "" {
		p, err := o.c.ListPage(ctx, o.selector, ListOptions{Limit: o.pageSize, Cursor: cursor})
		if err != nil {
			return bootResult{err: err}
		}
		if p.Epoch != m.Epoch {
			return bootResult{err: &Error{Code: ErrEpochChanged.Code, Detail: "the broker restarted during the bootstrap"}}
		}
		for _, it := range p.Items {
			items[it.Route] = it
		}
		cursor = p.NextCursor
	}
	return bootResult{}
}

// applyTo applies one change to items.
func (o *Observer) applyTo(items map[string]Item, ch Change) {
	if o.broken.ignores(ch.Kind) {
		return
	}
	if ch.Kind == Acquired {
		items[ch.Route] = ch.Item
	} else {
		delete(items, ch.Route)
	}
}

func (o *Observer) apply(ch Change) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ch.Revision <= o.revision || o.broken&brokenIgnoreLive != 0 {
		return
	}
	o.applyTo(o.items, ch)
	o.revision = ch.Revision
	o.notify()
}

func (o *Observer) install(r bootResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.broken&brokenMergeViews != 0 {
		maps.Copy(o.items, r.items)
		r.items = o.items
	}
	o.items, o.epoch, o.revision = r.items, r.epoch, r.revision
	o.ready, o.err = true, nil
	o.stats.Bootstraps++
	o.notify()
}

func (o *Observer) notReady(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ready {
		o.stats.Recoveries++
	}
	o.ready, o.err = false, err
	o.notify()
}

// stop marks the observer stopped: by Close, by a fatal error, or by the
// end of its parent context (cause).
func (o *Observer) stop(cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopErr == nil {
		o.stopErr = cause
	}
	o.err = o.stopErr
	o.ready, o.closed = false, true
	o.notify()
}
