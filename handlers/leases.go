package handlers

import (
	"context"
	"time"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// leaseBody is what the holder is told of its lease. The outcome is on the
// wire when the holding has one: on acquire only, as the contract says.
func leaseBody(r core.Route, h core.Holding) api.Lease {
	out := api.Lease{
		Route:        r.String(),
		FencingToken: int64(h.Token),
		AcquiredAt:   h.Item.AcquiredAt(),
		ExpiresAt:    h.Item.ExpiresAt(),
		Renewals:     int64(h.Item.Renewals()),
	}
	switch h.Outcome {
	case core.OutcomeAcquired:
		o := api.LeaseOutcomeAcquired
		out.Outcome = &o
	case core.OutcomeAlreadyHeld:
		o := api.LeaseOutcomeAlreadyHeld
		out.Outcome = &o
	}
	if h.Outcome != core.OutcomeNone {
		ms := h.ExpiresAfterRequest.Milliseconds() // rounded down: still a lower bound
		out.ExpiresAfterRequestMs = &ms
	}
	return out
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// mutation is what every lease mutation starts from: the exact route,
// authorized for write, and the acting session of the caller's family.
type mutation struct {
	route   core.Route
	session core.SessionID
	family  core.Family
}

func newMutation(ctx context.Context, realm, area, resource, sessionID string) (mutation, error) {
	r, err := authorizeRoute(ctx, realm, area, resource, core.Write)
	if err != nil {
		return mutation{}, err
	}
	id, err := core.ParseSessionID(sessionID)
	if err != nil {
		return mutation{}, err
	}
	return mutation{route: r, session: id, family: callerFrom(ctx).Family}, nil
}

// AcquireLease acquires an exact lease, long-polling up to wait_ms in FIFO
// order. A client that leaves while waiting leaves the queue; a grant that
// reaches a request whose client has left is rolled back by the core.
func (s *Server) AcquireLease(ctx context.Context, req api.AcquireLeaseRequestObject) (api.AcquireLeaseResponseObject, error) {
	m, err := newMutation(ctx, req.Realm, req.Area, req.Resource, req.Body.SessionId)
	if err != nil {
		return nil, err
	}
	var wait int64
	if req.Body.WaitMs != nil {
		wait = *req.Body.WaitMs
	}
	h, err := s.broker.Acquire(ctx, core.AcquireRequest{
		Family:  m.family,
		Session: m.session,
		Route:   m.route,
		TTL:     millis(req.Body.TtlMs),
		Wait:    millis(wait),
	})
	if err != nil {
		return nil, err
	}
	return api.AcquireLease200JSONResponse(leaseBody(m.route, h)), nil
}

// ExtendLease extends a held lease.
func (s *Server) ExtendLease(ctx context.Context, req api.ExtendLeaseRequestObject) (api.ExtendLeaseResponseObject, error) {
	m, err := newMutation(ctx, req.Realm, req.Area, req.Resource, req.Body.SessionId)
	if err != nil {
		return nil, err
	}
	h, err := s.broker.Extend(ctx, core.ExtendRequest{Family: m.family, Session: m.session, Route: m.route, Token: core.FencingToken(req.Body.FencingToken), TTL: millis(req.Body.TtlMs)})
	if err != nil {
		return nil, err
	}
	return api.ExtendLease200JSONResponse(leaseBody(m.route, h)), nil
}

// ReleaseLease releases a held lease; not held is a success.
func (s *Server) ReleaseLease(ctx context.Context, req api.ReleaseLeaseRequestObject) (api.ReleaseLeaseResponseObject, error) {
	m, err := newMutation(ctx, req.Realm, req.Area, req.Resource, req.Body.SessionId)
	if err != nil {
		return nil, err
	}
	if err := s.broker.Release(ctx, core.ReleaseRequest{Family: m.family, Session: m.session, Route: m.route, Token: core.FencingToken(req.Body.FencingToken)}); err != nil {
		return nil, err
	}
	return api.ReleaseLease204Response{}, nil
}

// GetLease reads one route: holder, times, renewals, waiters. Never a
// session id or a fencing token.
func (s *Server) GetLease(ctx context.Context, req api.GetLeaseRequestObject) (api.GetLeaseResponseObject, error) {
	r, err := authorizeRoute(ctx, req.Realm, req.Area, req.Resource, core.Read)
	if err != nil {
		return nil, err
	}
	st, err := s.broker.Query(ctx, callerFrom(ctx).Family, r)
	if err != nil {
		return nil, err
	}
	out := api.LeaseStatus{Route: r.String(), Held: st.Item != nil, Waiters: st.Waiters}
	if it := st.Item; it != nil {
		acquired, expires := it.AcquiredAt(), it.ExpiresAt()
		remaining := it.RemainingMs(s.now())
		renewals := int64(it.Renewals())
		owner, inc := it.OwnerID(), it.HolderIncarnation()
		out.OwnerId, out.HolderIncarnation = &owner, &inc
		out.AcquiredAt, out.ExpiresAt = &acquired, &expires
		out.RemainingMs, out.Renewals = &remaining, &renewals
	}
	return api.GetLease200JSONResponse(out), nil
}
