package muster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The worker ops of the Go conformance runner (conformance_test.go).

// workerAcquire runs worker_acquire: the worker (its client built on first
// use) creates a session when it has none or new_session asks, and
// acquires route. An error advised "backoff" (a transport error, a
// failover in progress) is retried until timeout_ms; the fencing token must
// be at least min_token and above every token of the route seen before.
func (r *runner) workerAcquire(ctx context.Context, st obsStep) error {
	w := r.workers[st.Worker]
	if w == nil {
		c, err := r.client(ctx, st.Token, st.Brokers)
		if err != nil {
			return err
		}
		w = &worker{c: c, leases: map[string]*Lease{}}
		r.workers[st.Worker] = w
	}
	if st.NewSession {
		w.session = nil
	}
	ctx, cancel := context.WithTimeout(ctx, st.timeout())
	defer cancel()
	for {
		l, err := w.acquire(ctx, st)
		if err == nil {
			tok := l.FencingToken()
			if tok < st.MinToken || tok <= r.highest[st.Route] {
				return fmt.Errorf("fencing token %d, want at least %d and above %d", tok, st.MinToken, r.highest[st.Route])
			}
			r.highest[st.Route] = tok
			w.leases[st.Route] = l
			return nil
		}
		if Advice(err) != RetryBackoff || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// workerExtend runs worker_extend: the lease of route that the worker's
// last worker_acquire got is extended by ttl_ms, with its fencing token;
// an error advised "backoff" is retried until timeout_ms.
func (r *runner) workerExtend(ctx context.Context, st obsStep) error {
	l, err := r.workerLease(st)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, st.timeout())
	defer cancel()
	for {
		err := l.Extend(ctx, time.Duration(st.TTLMs)*time.Millisecond)
		if err == nil || Advice(err) != RetryBackoff || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// workerLost runs worker_lost: the lease of route that the worker's last
// worker_acquire got reports its loss (Lost closed, Err matching
// ErrLeaseLost) within timeout_ms.
func (r *runner) workerLost(st obsStep) error {
	l, err := r.workerLease(st)
	if err != nil {
		return err
	}
	select {
	case <-l.Lost():
	case <-time.After(st.timeout()):
		return fmt.Errorf("the lease of %s reported no loss within %v", st.Route, st.timeout())
	}
	if !errors.Is(l.Err(), ErrLeaseLost) {
		return fmt.Errorf("the lease of %s ended with %v, want a loss (ErrLeaseLost)", st.Route, l.Err())
	}
	return nil
}

// workerLease is the lease of route that the worker's last worker_acquire
// got.
func (r *runner) workerLease(st obsStep) (*Lease, error) {
	if w := r.workers[st.Worker]; w != nil && w.leases[st.Route] != nil {
		return w.leases[st.Route], nil
	}
	return nil, fmt.Errorf("worker %q acquired no lease of %s", st.Worker, st.Route)
}

// workerHolds runs worker_holds: the lease of route that the worker's last
// worker_acquire got reports no loss for for_ms.
func (r *runner) workerHolds(st obsStep) error {
	l, err := r.workerLease(st)
	if err != nil {
		return err
	}
	select {
	case <-l.Lost():
		return fmt.Errorf("the lease of %s was lost: %v", st.Route, l.Err())
	case <-time.After(time.Duration(st.ForMs) * time.Millisecond):
		return nil
	}
}

func (w *worker) acquire(ctx context.Context, st obsStep) (*Lease, error) {
	if w.session == nil {
		ttl := 10 * time.Second
		if st.SessionTTLMs > 0 {
			ttl = time.Duration(st.SessionTTLMs) * time.Millisecond
		}
		s, err := w.c.NewSession(ctx, st.Worker, ttl)
		if err != nil {
			return nil, err
		}
		w.session = s
		w.sessions = append(w.sessions, s)
	}
	var opts []AcquireOption
	if st.WaitMs > 0 {
		opts = append(opts, Wait(time.Duration(st.WaitMs)*time.Millisecond))
	}
	return w.session.Acquire(ctx, st.Route, time.Duration(st.TTLMs)*time.Millisecond, opts...)
}
