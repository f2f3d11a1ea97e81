package muster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// ErrSessionLost wraps every reason a Session ended other than its own
// Close: the broker answered session_not_found (a broker restart, an
// operator, a long pause), or no keepalive got through within the TTL.
var ErrSessionLost = errors.New("muster: session lost")

// Session is a worker's liveness on one broker: it keeps itself alive in
// the background (a keepalive every TTL/3) until Close, or until it is lost.
// Every lease is acquired through a session and is lost with it.
//
// A Session is safe for concurrent use. Done is closed when the session
// ends, and Err says why: ErrClosed after Close, an error matching
// ErrSessionLost otherwise. A lost session is never revived: create a new
// one (and acquire again; after a broker restart every route is free).
type Session struct {
	c           *Client
	id          string
	ownerID     string
	incarnation string
	ttl         time.Duration

	stop     context.CancelFunc
	loopDone chan struct{}

	mu sync.Mutex
	// host and epoch: the broker that last answered one of the session's
	// requests, and its lifetime: it holds the session (its creator, or
	// the broker a planned move took the family to).
	host, epoch string
	leases      map[string]*Lease // by route
	err         error
	done        chan struct{}
}

// NewSession creates a session for ownerID (the application's logical owner,
// shown in inventory items) with the given TTL (1 s .. 10 min). ctx bounds
// the creating request only.
func (c *Client) NewSession(ctx context.Context, ownerID string, ttl time.Duration) (*Session, error) {
	t0 := time.Now()
	var out api.Session
	resp, err := c.raw.CreateSession(ctx, api.CreateSessionRequest{OwnerId: ownerID, TtlMs: ttl.Milliseconds()})
	host := answeredBy(resp)
	if err := c.call(resp, err, 201, &out); err != nil {
		return nil, err
	}
	loopCtx, stop := context.WithCancel(context.Background())
	s := &Session{
		c: c, id: out.SessionId, ownerID: out.OwnerId, incarnation: out.HolderIncarnation,
		epoch: out.Epoch, host: host, ttl: time.Duration(out.TtlMs) * time.Millisecond,
		stop: stop, loopDone: make(chan struct{}),
		leases: make(map[string]*Lease), done: make(chan struct{}),
	}
	c.trackSession(s)
	go s.keepalive(loopCtx, t0.Add(s.ttl))
	return s, nil
}

// ID is the session id. It is a secret: whoever has it can release this
// session's leases. It is exposed for the low-level client (Client.Raw) only.
func (s *Session) ID() string { return s.id }

// OwnerID is the logical owner the session was created for.
func (s *Session) OwnerID() string { return s.ownerID }

// HolderIncarnation is the public, opaque id of this session, as shown in
// the inventory items of its leases.
func (s *Session) HolderIncarnation() string { return s.incarnation }

// Epoch is the lifetime of the broker that holds the session: the one that
// created it, or the one a planned move took its family to.
func (s *Session) Epoch() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// call is Client.call for a request of the session: an answer of success
// first records its broker as the session's (a planned move takes a
// family's sessions to another broker; docs/client-operations.md, "Planned
// moves"), so that prompt loss judges later answers against that broker.
func (s *Session) call(resp *http.Response, err error, want int, out any) error {
	if err == nil && resp.StatusCode == want && !s.c.creatorLoss {
		if e := resp.Header.Get("Muster-Epoch"); e != "" {
			s.mu.Lock()
			s.host, s.epoch = answeredBy(resp), e
			s.mu.Unlock()
		}
	}
	return s.c.call(resp, err, want, out)
}

// holds reports whether the session is held by host under another epoch
// than epoch ("": any epoch): prompt loss (loss.go).
func (s *Session) heldBy(host, epoch string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.host == host && (epoch == "" || s.epoch != epoch)
}

// TTL is the session's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the session lives, then why it ended.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the session at the broker (its leases are released there, each
// with a session_closed change) and locally (every Lease is lost with
// ErrClosed). Closing a session that already ended only stops its keepalive.
func (s *Session) Close(ctx context.Context) error {
	s.stop()
	<-s.loopDone
	if s.Err() != nil {
		s.end(ErrClosed)
		return nil
	}
	s.end(ErrClosed)
	resp, err := s.c.raw.DeleteSession(ctx, s.id)
	err = s.call(resp, err, 204, nil)
	if errors.Is(err, ErrSessionNotFound) {
		return nil
	}
	return err
}

// end records why the session ended, once, and loses its leases.
func (s *Session) end(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = cause
	leases := s.leases
	s.leases = nil
	close(s.done)
	s.mu.Unlock()
	s.c.untrackSession(s)
	s.stop()
	for _, l := range leases {
		l.end(fmt.Errorf("%w: %w", ErrLeaseLost, cause))
	}
}

// keepalive keeps the session alive every TTL/3 until stopped. A failed
// keepalive is retried with backoff; when none got through by the local
// deadline (a lower bound of the broker's), the session is lost.
func (s *Session) keepalive(ctx context.Context, deadline time.Time) {
	defer close(s.loopDone)
	interval := s.ttl / 3
	backoff := newBackoff(100*time.Millisecond, interval)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-timer.C:
		}
		if lastErr != nil && !time.Now().Before(deadline) {
			s.end(fmt.Errorf("%w: no keepalive got through within the TTL: %w", ErrSessionLost, lastErr))
			return
		}
		t0 := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := s.c.raw.KeepaliveSession(rctx, s.id, resendable)
		err = s.call(resp, err, 200, nil)
		cancel()
		switch {
		case err == nil:
			deadline, lastErr = t0.Add(s.ttl), nil
			backoff.reset()
			timer.Reset(interval)
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrSessionNotFound):
			s.end(fmt.Errorf("%w: %w", ErrSessionLost, err))
			return
		default:
			if lastErr == nil || !isContextErr(err) {
				lastErr = err
			}
			timer.Reset(max(0, min(backoff.next(), time.Until(deadline))))
		}
	}
}

// resendable marks a request that may be sent twice (a keepalive, an
// extend: the second only moves the expiry again, from a later instant,
// and the client counts from the first): net/http then sends it again on
// a new connection when a kept-alive one closed under it before any
// answer (a broker closing its idle connections as it stops), instead of
// failing with EOF.
func resendable(_ context.Context, req *http.Request) error {
	req.Header.Set("Idempotency-Key", "resendable")
	return nil
}

// notFound ends the session at once when err is the broker's
// session_not_found for one of its requests (prompt loss: loss.go).
func (s *Session) notFound(err error) {
	if errors.Is(err, ErrSessionNotFound) && !s.c.lateLoss {
		s.end(fmt.Errorf("%w: %w", ErrSessionLost, err))
	}
}

// track registers l with the session; it reports false when the session has
// ended (l is then lost at once).
func (s *Session) track(l *Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.leases[l.r.String()] = l
	return true
}

func (s *Session) untrack(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[l.r.String()] == l {
		delete(s.leases, l.r.String())
	}
}

func (s *Session) handle(r string) *Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[r]
}
