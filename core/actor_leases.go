package core

import (
	"context"
	"time"
)

// AcquireRequest is one acquisition.
type AcquireRequest struct {
	Family  string
	Session SessionID
	Route   Route
	TTL     time.Duration
	Wait    time.Duration
}

// Acquire acquires a lease, waiting in FIFO order up to req.Wait when it is
// held by another session. If ctx ends while waiting, the waiter leaves the
// queue. If ctx has ended by the time a fresh grant reaches the caller, the
// grant cannot be handed over: it is rolled back (RolledBack event) and
// ctx.Err() is returned.
func (b *Broker) Acquire(ctx context.Context, req AcquireRequest) (Holding, error) {
	type started struct {
		h      Holding
		ticket uint64
		ch     chan WaitResult
	}
	st, err := callFam(ctx, b, req.Family, func(s *State, now time.Time) (started, error) {
		h, ticket, err := s.Acquire(now, req.Family, req.Session, req.Route, req.TTL, req.Wait)
		if err != nil || ticket == 0 {
			return started{h: h}, err
		}
		ch := make(chan WaitResult, 1)
		b.waiting[ticket] = ch
		return started{ticket: ticket, ch: ch}, nil
	})
	if err != nil {
		return Holding{}, err
	}
	h := st.h
	if st.ch != nil {
		var r WaitResult
		select {
		case r = <-st.ch:
		case <-ctx.Done():
			r = b.cancelWait(st.ticket, st.ch)
			if r.Err == nil {
				b.Rollback(req, r.Grant)
			}
			return Holding{}, ctx.Err()
		case <-b.done:
			return Holding{}, errClosed
		}
		if r.Err != nil {
			return Holding{}, r.Err
		}
		h = r.Grant
	}
	if ctx.Err() != nil {
		b.Rollback(req, h)
		return Holding{}, ctx.Err()
	}
	return h, nil
}

// cancelWait removes a queued acquisition whose requester left. When the
// wait had already ended, its result is in ch (the actor delivers results
// before it runs the next command) and is returned; otherwise a result with
// a non-nil error.
func (b *Broker) cancelWait(ticket uint64, ch chan WaitResult) WaitResult {
	gone := WaitResult{Err: context.Canceled}
	removed, err := call(context.Background(), b, func(s *State, _ time.Time) (bool, error) {
		delete(b.waiting, ticket)
		return s.CancelWait(ticket), nil
	})
	if err != nil || removed {
		return gone
	}
	select {
	case r := <-ch:
		return r
	default:
		return gone
	}
}

// Rollback undoes a fresh grant that could not be handed to its requester.
// An already_held answer is never rolled back: nothing was granted.
func (b *Broker) Rollback(req AcquireRequest, h Holding) {
	if h.Outcome != OutcomeAcquired {
		return
	}
	_, _ = call(context.Background(), b, func(s *State, now time.Time) (struct{}, error) {
		s.Rollback(now, req.Family, req.Session, req.Route, h.Token)
		return struct{}{}, nil
	})
}

// Extend extends a held lease; see State.Extend.
func (b *Broker) Extend(ctx context.Context, fam string, id SessionID, r Route, token uint64, ttl time.Duration) (Holding, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (Holding, error) {
		return s.Extend(now, fam, id, r, token, ttl)
	})
}

// Release releases a held lease; see State.Release.
func (b *Broker) Release(ctx context.Context, fam string, id SessionID, r Route, token uint64) error {
	_, err := callFam(ctx, b, fam, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Release(now, fam, id, r, token)
	})
	return err
}

// Query reads one route; see State.Query.
func (b *Broker) Query(ctx context.Context, fam string, r Route) (LeaseStatus, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (LeaseStatus, error) {
		return s.Query(now, fam, r), nil
	})
}

// OpenSnapshot takes an inventory snapshot; see State.OpenSnapshot.
func (b *Broker) OpenSnapshot(ctx context.Context, fam, caller string) (*Snapshot, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (*Snapshot, error) {
		return s.OpenSnapshot(now, fam, caller), nil
	})
}

// ResumeSnapshot finds an open snapshot; see State.ResumeSnapshot.
func (b *Broker) ResumeSnapshot(ctx context.Context, id uint64, fam string) (*Snapshot, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (*Snapshot, error) {
		return s.ResumeSnapshot(now, id, fam)
	})
}

// Lookup is the exact-selector read with the revision it was read at.
func (b *Broker) Lookup(ctx context.Context, fam string, r Route) (*Item, uint64, error) {
	type res struct {
		it  *Item
		rev uint64
	}
	v, err := callFam(ctx, b, fam, func(s *State, now time.Time) (res, error) {
		it := s.Lookup(now, fam, r)
		return res{it, s.famRevOf(fam)}, nil
	})
	return v.it, v.rev, err
}
