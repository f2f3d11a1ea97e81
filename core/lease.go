package core

import (
	"time"
	"unsafe"

	"github.com/musterhq/muster"
)

// Lease bounds.
const (
	MinLeaseTTL      = 100 * time.Millisecond
	MaxLeaseTTL      = 10 * time.Minute
	MaxWait          = 30 * time.Second
	MaxWaitersPerKey = 100
)

// lease is the mutable core record of one held lease.
type lease struct {
	item    *Item // current public record; replaced on renewal
	fam     *family
	holder  *session
	token   FencingToken // the revision of the grant
	heapIdx int32        // index in the expiry heap
	// Where the lease is in its family's held index (family.go): its
	// place + 1 on the family's list of changes to apply (0: not on it),
	// and whether its key is in the tree.
	staleIdx int32
	inTree   bool
	// the holder session's leases form an intrusive list
	prev, next *lease
}

// granted is a lease allocated with the Item of its grant and, when it is
// short, its key: one allocation of 160 bytes instead of three (64 + 80 +
// the key's). A renewal gives the lease a new Item; this one stays as it
// was, immutable like every published Item and the key's bytes, for the
// snapshots and events that hold them.
type granted struct {
	lease lease
	item  Item
	key   [24]byte
}

// keyOf is r's key, in g's own bytes when it fits.
func (g *granted) keyOf(r Route) string {
	n := len(r.Realm) + len(r.Area) + len(r.Resource) + 2
	if n > len(g.key) {
		return r.Key()
	}
	b := append(g.key[:0], r.Realm...)
	b = append(b, '/')
	b = append(b, r.Area...)
	b = append(b, '/')
	b = append(b, r.Resource...)
	return unsafe.String(&b[0], len(b)) // g.key's bytes (n fits), never written again
}

// Outcome says how an acquisition was answered. The zero value, OutcomeNone,
// is the outcome of every holding that no acquisition produced (Extend).
type Outcome uint8

// Acquisition outcomes.
const (
	OutcomeNone        Outcome = iota // no acquisition produced the holding
	OutcomeAcquired                   // newly granted
	OutcomeAlreadyHeld                // the session already held it; nothing changed
)

// Holding is what the holder learns of its lease: the public record plus the
// fencing token. Only the holding session is ever shown a Holding.
type Holding struct {
	Item    *Item
	Token   FencingToken
	Outcome Outcome // set by Acquire only; OutcomeNone otherwise
	// ExpiresAfterRequest, set by Acquire only, is how long after the
	// acquisition arrived (the now of the Acquire call) the lease expires:
	// the TTL for a grant at once, the wait plus the TTL for a grant to a
	// waiter, what is left of the existing grant for OutcomeAlreadyHeld.
	// A client that sent the request at t knows the lease is held until at
	// least t + ExpiresAfterRequest: the request arrived after t.
	ExpiresAfterRequest time.Duration
}

// LeaseStatus is the answer to a query of one route.
type LeaseStatus struct {
	Route   Route
	Item    *Item // nil when not held
	Waiters int
}

func checkLeaseTTL(ttl time.Duration) error {
	if ttl < MinLeaseTTL || ttl > MaxLeaseTTL {
		return muster.Errorf(muster.CodeInvalidRequest, "ttl_ms must be %d..%d", MinLeaseTTL.Milliseconds(), MaxLeaseTTL.Milliseconds())
	}
	return nil
}

// AcquireRequest is one acquisition of Route by Session of Family, for TTL,
// waiting up to Wait (0: no wait) when another session holds it.
type AcquireRequest struct {
	Family  Family
	Session SessionID
	Route   Route
	TTL     time.Duration
	Wait    time.Duration
}

// ExtendRequest renews the lease that Session holds on Route under Token
// for TTL from now.
type ExtendRequest struct {
	Family  Family
	Session SessionID
	Route   Route
	Token   FencingToken
	TTL     time.Duration
}

// ReleaseRequest ends the lease that Session holds on Route under Token.
type ReleaseRequest struct {
	Family  Family
	Session SessionID
	Route   Route
	Token   FencingToken
}

// Acquire grants route to the session when it is free. When the session
// already holds it, the existing grant is returned unchanged (TTL not reset).
// When another session holds it, wait 0 answers lease_held; otherwise the
// session joins the FIFO queue and Acquire returns a ticket: the result comes
// later as a WaitResult with that ticket.
func (s *State) Acquire(now time.Time, req AcquireRequest) (Holding, Ticket, error) {
	fam, id, r, ttl, wait := req.Family, req.Session, req.Route, req.TTL, req.Wait
	if err := checkLeaseTTL(ttl); err != nil {
		return Holding{}, 0, err
	}
	if wait < 0 || wait > MaxWait {
		return Holding{}, 0, muster.Errorf(muster.CodeInvalidRequest, "wait_ms must be 0..%d", MaxWait.Milliseconds())
	}
	ss, err := s.liveSession(now, fam, id)
	if err != nil {
		return Holding{}, 0, err
	}
	return s.acquire(now, s.family(fam), ss, r, ttl, wait)
}

// acquire is Acquire by the live session ss of f, with ttl and wait checked.
func (s *State) acquire(now time.Time, f *family, ss *session, r Route, ttl, wait time.Duration) (Holding, Ticket, error) {
	l := f.lookup(r)
	switch {
	case l == nil:
		s.stats.AcquireGranted++
		g := &granted{}
		h := s.place(now, f, g, g.keyOf(r), ss, ttl)
		h.ExpiresAfterRequest = ttl
		return h, 0, nil
	case l.holder == ss:
		s.stats.AcquireAlreadyHeld++
		left := time.Duration(l.item.expiresAt - now.UnixNano())
		return Holding{Item: l.item, Token: l.token, Outcome: OutcomeAlreadyHeld, ExpiresAfterRequest: max(left, 0)}, 0, nil
	case wait == 0:
		s.stats.AcquireHeld++
		return Holding{}, 0, muster.Errorf(muster.CodeLeaseHeld, "the lease is held by another session")
	}
	ticket, err := s.enqueue(now, f, r.Key(), ss, ttl, wait)
	return Holding{}, ticket, err
}

// grant makes ss the holder of the free route key: a new revision, a new
// fencing token, an Acquired event.
func (s *State) grant(now time.Time, f *family, key string, ss *session, ttl time.Duration) Holding {
	return s.place(now, f, &granted{}, key, ss, ttl)
}

// place is grant into g, a fresh allocation (whose bytes key may be).
func (s *State) place(now time.Time, f *family, g *granted, key string, ss *session, ttl time.Duration) Holding {
	rev := s.bump(f)
	n := now.UnixNano()
	g.item = Item{key: key, ownerID: ss.OwnerID, incarnation: ss.Incarnation, acquiredAt: n, expiresAt: n + int64(ttl)}
	it, l := &g.item, &g.lease
	*l = lease{item: it, fam: f, holder: ss, token: FencingToken(rev)}
	f.leases[key] = l
	f.noteHeld(l)
	s.leaseDue.push(l)
	ss.addLease(l)
	s.events = append(s.events, Event{Family: f.name, Key: key, Kind: Acquired, Revision: rev, Item: it})
	return Holding{Item: it, Token: l.token, Outcome: OutcomeAcquired}
}

// holding finds the lease that session id holds on r with token, or the
// error that explains why not.
func (s *State) holding(now time.Time, fam Family, id SessionID, r Route, token FencingToken) (*lease, error) {
	ss, err := s.liveSession(now, fam, id)
	if err != nil {
		return nil, err
	}
	return s.heldBy(s.families[fam], ss, r, token)
}

// heldBy finds the lease that the live session ss holds on r of f (nil:
// no such family yet) with token, or the error that explains why not; a
// route that is not held is (nil, nil).
func (s *State) heldBy(f *family, ss *session, r Route, token FencingToken) (*lease, error) {
	var l *lease
	if f != nil {
		l = f.lookup(r)
	}
	switch {
	case l == nil:
		return nil, nil
	case l.holder != ss:
		s.stats.Rejected++
		return nil, muster.Errorf(muster.CodeNotOwner, "the lease is held by another session")
	case l.token != token:
		s.stats.Rejected++
		return nil, muster.Errorf(muster.CodeFenced, "the fencing token is not the current one")
	}
	return l, nil
}

// Extend moves the expiry of a held lease to now+ttl. Only the holder with
// the current token may; the token is unchanged, renewals grows by one, the
// revision advances, and no event is produced.
func (s *State) Extend(now time.Time, req ExtendRequest) (Holding, error) {
	if err := checkLeaseTTL(req.TTL); err != nil {
		return Holding{}, err
	}
	l, err := s.holding(now, req.Family, req.Session, req.Route, req.Token)
	if err != nil {
		return Holding{}, err
	}
	return s.extend(now, l, req.TTL)
}

// extend renews l, the lease the caller holds (nil: it is not held), for
// ttl, checked.
func (s *State) extend(now time.Time, l *lease, ttl time.Duration) (Holding, error) {
	if l == nil {
		return Holding{}, muster.Errorf(muster.CodeLeaseExpired, "the lease is not held: it expired or was released")
	}
	s.bump(l.fam)
	it := *l.item
	it.expiresAt = now.UnixNano() + int64(ttl)
	it.renewals++
	l.item = &it
	l.fam.noteHeld(l)
	s.leaseDue.moved(l)
	s.stats.Renewals++
	return Holding{Item: l.item, Token: l.token}, nil
}

// Release ends a held lease. Only the holder with the current token may;
// releasing a route that is not held succeeds. The next waiter is granted.
func (s *State) Release(now time.Time, req ReleaseRequest) error {
	l, err := s.holding(now, req.Family, req.Session, req.Route, req.Token)
	if err != nil || l == nil {
		return err
	}
	s.release(now, l)
	return nil
}

// release ends l, the lease the caller holds.
func (s *State) release(now time.Time, l *lease) {
	s.stats.Releases++
	s.removeLease(now, l, Released)
}

// Rollback undoes a fresh grant whose response could not be handed to its
// requester, named as its release would be: if the session still holds the
// route with the token, the lease is removed with a RolledBack event and
// the next waiter is considered. Anything else (already released, expired,
// re-granted) is left alone.
func (s *State) Rollback(now time.Time, grant ReleaseRequest) {
	s.expireDue(now)
	f := s.families[grant.Family]
	if f == nil {
		return
	}
	l := f.lookup(grant.Route)
	if l == nil || l.holder.ID != grant.Session || l.token != grant.Token {
		return
	}
	s.stats.Rollbacks++
	s.removeLease(now, l, RolledBack)
}

// Query reports the state of one route after processing due expiry.
func (s *State) Query(now time.Time, fam Family, r Route) LeaseStatus {
	s.expireDue(now)
	st := LeaseStatus{Route: r}
	if f := s.families[fam]; f != nil {
		if l := f.lookup(r); l != nil {
			st.Item = l.item
		}
		if q := f.queues[r.Key()]; q != nil {
			st.Waiters = q.len
		}
	}
	return st
}

// removeLease takes l out of the held set with an event of kind, then
// grants the route to the next live waiter, if any.
func (s *State) removeLease(now time.Time, l *lease, kind ChangeKind) {
	f, key := l.fam, l.item.key
	delete(f.leases, key)
	f.noteGone(l)
	s.leaseDue.remove(l)
	l.holder.removeLease(l)
	l.holder, l.fam = nil, nil // an Item of l's allocation (granted) may outlive it in a snapshot
	rev := s.bump(f)
	s.events = append(s.events, Event{Family: f.name, Key: key, Kind: kind, Revision: rev})
	s.grantNext(now, f, key)
}

// expireLeases removes every lease whose expiry is strictly before now.
func (s *State) expireLeases(now time.Time) {
	n := now.UnixNano()
	for {
		l := s.leaseDue.peek()
		if l == nil || l.item.expiresAt >= n {
			return
		}
		s.stats.Expiries++
		s.removeLease(now, l, Expired)
	}
}

// addLease links l into the session's list of held leases.
func (ss *session) addLease(l *lease) {
	l.next = ss.leases
	if ss.leases != nil {
		ss.leases.prev = l
	}
	ss.leases = l
}

// removeLease unlinks l from the session's list.
func (ss *session) removeLease(l *lease) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		ss.leases = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	l.prev, l.next = nil, nil
}
