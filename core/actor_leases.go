package core

import (
	"context"
	"time"
)

// Acquire acquires a lease, waiting in FIFO order up to req.Wait when it is
// held by another session. If ctx ends while waiting, the waiter leaves the
// queue. If ctx has ended by the time a fresh grant reaches the caller, the
// grant cannot be handed over: it is rolled back (RolledBack event) and
// ctx.Err() is returned.
func (b *Broker) Acquire(ctx context.Context, req AcquireRequest) (Holding, error) {
	type started struct {
		h      Holding
		ticket Ticket
		ch     chan WaitResult
	}
	st, err := callFam(ctx, b, req.Family, func(s *State, now time.Time) (started, error) {
		h, ticket, err := s.Acquire(now, req)
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
func (b *Broker) cancelWait(ticket Ticket, ch chan WaitResult) WaitResult {
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
		s.Rollback(now, ReleaseRequest{Family: req.Family, Session: req.Session, Route: req.Route, Token: h.Token})
		return struct{}{}, nil
	})
}

// Extend extends a held lease; see State.Extend.
func (b *Broker) Extend(ctx context.Context, req ExtendRequest) (Holding, error) {
	return callFam(ctx, b, req.Family, func(s *State, now time.Time) (Holding, error) {
		return s.Extend(now, req)
	})
}

// Release releases a held lease; see State.Release.
func (b *Broker) Release(ctx context.Context, req ReleaseRequest) error {
	_, err := callFam(ctx, b, req.Family, func(s *State, now time.Time) (struct{}, error) {
		return struct{}{}, s.Release(now, req)
	})
	return err
}

// Query reads one route; see State.Query.
func (b *Broker) Query(ctx context.Context, fam Family, r Route) (LeaseStatus, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (LeaseStatus, error) {
		return s.Query(now, fam, r), nil
	})
}

// OpenSnapshot takes an inventory snapshot; see State.OpenSnapshot.
func (b *Broker) OpenSnapshot(ctx context.Context, fam Family, caller string) (*Snapshot, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (*Snapshot, error) {
		return s.OpenSnapshot(now, fam, caller), nil
	})
}

// ResumeSnapshot finds an open snapshot; see State.ResumeSnapshot.
func (b *Broker) ResumeSnapshot(ctx context.Context, fam Family, id SnapshotID) (*Snapshot, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (*Snapshot, error) {
		return s.ResumeSnapshot(now, fam, id)
	})
}

// Lookup is the exact-selector read; see State.Lookup.
func (b *Broker) Lookup(ctx context.Context, fam Family, r Route) (LookupResult, error) {
	return callFam(ctx, b, fam, func(s *State, now time.Time) (LookupResult, error) {
		return s.Lookup(now, fam, r), nil
	})
}
