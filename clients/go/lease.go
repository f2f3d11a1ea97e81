package muster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// Lease is a lease held by a Session: the only ownership handle of this
// package, and only Session.Acquire makes one. It is safe for concurrent use.
//
// Lost is closed when the lease is no longer held, and Err says why:
// ErrReleased after its own Release; otherwise an error matching ErrLeaseLost
// and its cause: ErrNotOwner, ErrFenced or ErrLeaseExpired from the broker,
// ErrLeaseExpired when the local deadline passed without a successful
// extension (the local deadline is measured from the moment the request was
// sent, so it never lies after the broker's), or the session's end.
type Lease struct {
	s     *Session
	r     route
	token int64

	mu         sync.Mutex
	acquiredAt time.Time
	expiresAt  time.Time
	renewals   int64
	timer      *time.Timer // fires at the local deadline
	err        error
	lost       chan struct{}
}

// AcquireOption tunes Acquire.
type AcquireOption func(*acquireConfig)

type acquireConfig struct{ wait time.Duration }

// Wait makes Acquire wait up to d (at most 30 s) in the route's FIFO queue
// when another session holds the lease, instead of failing at once with
// ErrLeaseHeld. When the wait ends without a grant Acquire fails with
// ErrWaitTimeout. Cancelling ctx leaves the queue.
func Wait(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.wait = d } }

// Acquire acquires the exact route (lease://realm/area/resource) for ttl
// (100 ms .. 10 min). When this session already holds it, Acquire returns the
// same *Lease (a second handle if the first was dropped) without resetting
// its TTL.
func (s *Session) Acquire(ctx context.Context, routeStr string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	r, err := parseRoute(routeStr)
	if err != nil {
		return nil, err
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	var cfg acquireConfig
	for _, o := range opts {
		o(&cfg)
	}
	body := api.AcquireRequest{SessionId: s.id, TtlMs: ttl.Milliseconds()}
	if cfg.wait > 0 {
		w := cfg.wait.Milliseconds()
		body.WaitMs = &w
	}
	t0 := time.Now()
	var out api.Lease
	resp, err := s.c.raw.AcquireLease(ctx, r.realm, r.area, r.resource, body)
	if err := s.call(resp, err, 200, &out); err != nil {
		s.notFound(err)
		return nil, err
	}
	return s.adopt(r, &out, t0, ttl), nil
}

// adopt makes the handle of a lease the broker granted (or answered
// already_held for) to a request sent at t0 for ttl: the existing handle
// when it is the same grant, otherwise a new one whose local deadline is
// t0 + expires_after_request_ms (see localDeadline).
func (s *Session) adopt(r route, out *api.Lease, t0 time.Time, ttl time.Duration) *Lease {
	if out.Outcome != nil && *out.Outcome == api.LeaseOutcomeAlreadyHeld {
		if l := s.handle(r.String()); l != nil && l.token == out.FencingToken {
			return l
		}
	}
	deadline := localDeadline(out, t0, ttl)
	if s.c.sendPlusTTL {
		deadline = t0.Add(ttl)
	}
	l := &Lease{
		s: s, r: r, token: out.FencingToken,
		acquiredAt: out.AcquiredAt, expiresAt: out.ExpiresAt, renewals: out.Renewals,
		lost: make(chan struct{}),
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(deadline), l.expired)
	l.mu.Unlock()
	if !s.track(l) {
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, s.Err()))
	}
	return l
}

// localDeadline is the local deadline of a lease an acquire sent at t0
// (time.Now: it carries the monotonic clock) for ttl was answered with:
// t0 + expires_after_request_ms, the broker's expiry measured from the
// moment it took the request up, which came after t0. So the deadline is
// never later than the broker's expiry, and after a wait in the queue it
// stays as close to it as the network allows (send + TTL would be a wait
// too early). A broker that does not send the member gets t0 + ttl: a lower
// bound for a grant, and, for already_held, the part of it the broker's
// expiry leaves (read on the broker's wall clock: the best it says).
func localDeadline(out *api.Lease, t0 time.Time, ttl time.Duration) time.Time {
	if out.ExpiresAfterRequestMs != nil {
		return t0.Add(time.Duration(*out.ExpiresAfterRequestMs) * time.Millisecond)
	}
	deadline := t0.Add(ttl)
	if out.Outcome != nil && *out.Outcome == api.LeaseOutcomeAlreadyHeld {
		if rem := time.Until(out.ExpiresAt); rem < ttl {
			deadline = time.Now().Add(rem)
		}
	}
	return deadline
}

// Route is the lease's exact route.
func (l *Lease) Route() string { return l.r.String() }

// FencingToken is the broker revision at which the lease was granted:
// strictly increasing per route, stable across renewals. Pass it to the
// resource the lease guards, which must refuse a token lower than the
// highest it has seen. It means nothing across routes or broker lifetimes.
func (l *Lease) FencingToken() int64 { return l.token }

// ExpiresAt is the broker's expiry of the lease as of the last grant or
// extension.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Renewals counts the successful extensions, as the broker reports them.
func (l *Lease) Renewals() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewals
}

// Lost is closed when the lease is no longer held (or released).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is held, then why it is not.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Extend extends the lease to now + ttl. When the broker answers that the
// lease is no longer this session's (ErrNotOwner, ErrFenced,
// ErrLeaseExpired, ErrSessionNotFound) the lease is lost and Extend returns
// Err. Any other failure (a transport error, ErrUnavailable) leaves the lease
// as it was: retry before the deadline.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.Err(); err != nil {
		return err
	}
	t0 := time.Now()
	var out api.Lease
	resp, err := l.s.c.raw.ExtendLease(ctx, l.r.realm, l.r.area, l.r.resource,
		api.ExtendRequest{SessionId: l.s.id, FencingToken: l.token, TtlMs: ttl.Milliseconds()}, resendable)
	if err := l.s.call(resp, err, 200, &out); err != nil {
		l.s.notFound(err)
		if ownershipGone(err) {
			l.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			return l.Err()
		}
		return err
	}
	return l.extended(&out, t0, ttl)
}

// extended records a successful extension sent at t0 for ttl.
func (l *Lease) extended(out *api.Lease, t0 time.Time, ttl time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.expiresAt, l.renewals = out.ExpiresAt, out.Renewals
	l.timer.Reset(time.Until(t0.Add(ttl)))
	return nil
}

// Release releases the lease; the next FIFO waiter (if any) is granted. It
// returns nil once the lease is known not to be held by this session any
// more, including when it was already lost; it returns an error only when
// that is unknown (a transport failure): the lease then ends at its TTL at
// the latest.
func (l *Lease) Release(ctx context.Context) error {
	if errors.Is(l.Err(), ErrReleased) {
		return nil
	}
	if serr := l.s.Err(); serr != nil {
		// The broker released it when the session ended.
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, serr))
		return nil
	}
	resp, err := l.s.c.raw.ReleaseLease(ctx, l.r.realm, l.r.area, l.r.resource,
		api.ReleaseRequest{SessionId: l.s.id, FencingToken: l.token})
	err = l.s.call(resp, err, 204, nil)
	l.s.notFound(err)
	switch {
	case err == nil:
		l.end(ErrReleased)
		return nil
	case ownershipGone(err):
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		return nil
	default:
		return err
	}
}

// ownershipGone reports answers that mean the lease is not this session's.
func ownershipGone(err error) bool {
	return errors.Is(err, ErrNotOwner) || errors.Is(err, ErrFenced) ||
		errors.Is(err, ErrLeaseExpired) || errors.Is(err, ErrSessionNotFound)
}

func (l *Lease) expired() {
	l.end(fmt.Errorf("%w: %w", ErrLeaseLost,
		&Error{Code: ErrLeaseExpired.Code, Detail: "the local deadline passed without a successful extension"}))
}

// end records why the lease is not held, once.
func (l *Lease) end(cause error) {
	if l.s.c.neverLost && !errors.Is(cause, ErrReleased) {
		return
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = cause
	if l.timer != nil {
		l.timer.Stop()
	}
	close(l.lost)
	l.mu.Unlock()
	l.s.untrack(l)
}

// WithLease acquires route for ttl, runs fn while holding it and releases it
// when fn returns. The lease is extended every ttl/3; when it is lost, fn's
// context is cancelled with the loss as its cause (context.Cause). WithLease
// returns fn's error; when fn returned nil but the lease was lost while it
// ran, the loss (matching ErrLeaseLost): work done without the lease must not
// be taken as done.
func (s *Session) WithLease(ctx context.Context, route string, ttl time.Duration,
	fn func(ctx context.Context, l *Lease) error, opts ...AcquireOption) error {
	l, err := s.Acquire(ctx, route, ttl, opts...)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		l.renew(wctx, ttl, cancel)
	}()
	ferr := fn(wctx, l)
	lost := l.Err()
	cancel(nil)
	<-renewed
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	_ = l.Release(rctx)
	if ferr != nil {
		return ferr
	}
	return lost
}

// renew extends l every ttl/3 until ctx ends; on loss it cancels with the
// loss. A failed extension is retried at the next tick; the local deadline
// decides when the lease is lost.
func (l *Lease) renew(ctx context.Context, ttl time.Duration, cancel context.CancelCauseFunc) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lost:
			cancel(l.Err())
			return
		case <-t.C:
			ectx, ecancel := context.WithTimeout(ctx, ttl/3)
			_ = l.Extend(ectx, ttl)
			ecancel()
		}
	}
}
