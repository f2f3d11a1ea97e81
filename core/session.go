package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/musterhq/muster"
)

// SessionID is a session's 128-bit secret identity. It never appears in
// logs, metric labels, inventory items, events or error messages; the public
// face of a session is its holder incarnation.
type SessionID [16]byte

// ParseSessionID decodes the 32 lowercase hex digits of the wire form.
func ParseSessionID(s string) (SessionID, error) {
	var id SessionID
	if len(s) != 2*len(id) {
		return id, muster.Errorf(muster.CodeInvalidRequest, "a session id is 32 lowercase hex digits")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return id, muster.Errorf(muster.CodeInvalidRequest, "a session id is 32 lowercase hex digits")
		}
	}
	_, _ = hex.Decode(id[:], []byte(s))
	return id, nil
}

// String is the wire form. Only the session's creator is ever shown it.
func (id SessionID) String() string { return hex.EncodeToString(id[:]) }

// Session bounds.
const (
	MinSessionTTL = time.Second
	MaxSessionTTL = 10 * time.Minute
	MaxOwnerIDLen = 512
)

// SessionInfo is a copy of a session's public state handed out by the core.
type SessionInfo struct {
	ID          SessionID
	Family      Family
	OwnerID     string
	Incarnation string
	TTL         time.Duration
	ExpiresAt   time.Time
}

// session is the core's record of one live session.
type session struct {
	SessionInfo
	leases    *lease                   // intrusive list of held leases
	waiters   map[Ticket]*waiter       // queued acquisitions by ticket
	regs      map[string]*registration // watch registrations by original selector
	wildcards int                      // wildcard registrations among regs
	readOnly  StreamID                 // non-zero: the read-only session of that stream
	pending   *pending                 // non-nil: moved here, its real id not seen yet (handover.go)
}

// incarnation is the holder incarnation of a session: HMAC-SHA256 of the
// session id under the epoch's key, truncated to 128 bits, base64url. The
// same session always gives the same value; another session, or the same
// id under another epoch key, gives an unrelated one.
func incarnation(key []byte, id SessionID) string {
	m := hmac.New(sha256.New, key)
	m.Write(id[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// SessionRequest creates one session. Its ID is chosen by the caller (the
// edge draws it from crypto/rand) so that the core stays free of I/O.
type SessionRequest struct {
	Family  Family
	ID      SessionID
	OwnerID string
	TTL     time.Duration
}

// CreateSession registers a new session that expires at now+req.TTL unless
// kept alive.
func (s *State) CreateSession(now time.Time, req SessionRequest) (SessionInfo, error) {
	id, family, ownerID, ttl := req.ID, req.Family, req.OwnerID, req.TTL
	if err := CheckOwnerID(ownerID); err != nil {
		return SessionInfo{}, err
	}
	if ttl < MinSessionTTL || ttl > MaxSessionTTL {
		return SessionInfo{}, muster.Errorf(muster.CodeInvalidRequest, "ttl_ms must be %d..%d", MinSessionTTL.Milliseconds(), MaxSessionTTL.Milliseconds())
	}
	s.expireDue(now)
	u := s.use(family)
	if q := s.quota(family).Sessions; over(u.Sessions, 1, q) {
		u.SessionsRefused++
		return SessionInfo{}, muster.LimitErrorf(muster.CodeSessionLimit, muster.ScopeFamily, "the family holds its quota of %d sessions", q)
	}
	if len(s.sessions)-s.readOnly >= s.cfg.MaxSessions {
		return SessionInfo{}, muster.LimitErrorf(muster.CodeSessionLimit, muster.ScopeBroker, "the broker holds its maximum of %d sessions", s.cfg.MaxSessions)
	}
	if _, dup := s.sessions[id]; dup {
		return SessionInfo{}, muster.Errorf(muster.CodeInternal, "session id collision")
	}
	ss := &session{SessionInfo: SessionInfo{
		ID:          id,
		Family:      family,
		OwnerID:     ownerID,
		Incarnation: incarnation(s.cfg.IncarnationKey, id),
		TTL:         ttl,
		ExpiresAt:   now.Add(ttl),
	}, waiters: map[Ticket]*waiter{}}
	s.sessions[id] = ss
	s.sessionDue.Set(id, ss.ExpiresAt)
	s.stats.SessionsCreated++
	u.Sessions++
	return ss.SessionInfo, nil
}

// Keepalive moves a live session's expiry to now + its TTL.
func (s *State) Keepalive(now time.Time, family Family, id SessionID) (SessionInfo, error) {
	ss, err := s.liveSession(now, family, id)
	if err != nil {
		return SessionInfo{}, err
	}
	ss.ExpiresAt = now.Add(ss.TTL)
	s.sessionDue.Set(id, ss.ExpiresAt)
	return ss.SessionInfo, nil
}

// EndSession ends a live session at the caller's request.
func (s *State) EndSession(now time.Time, family Family, id SessionID) error {
	ss, err := s.liveSession(now, family, id)
	if err != nil {
		return err
	}
	s.endSession(now, ss, EndDeleted)
	return nil
}

// Session returns a live session of family.
func (s *State) Session(now time.Time, family Family, id SessionID) (SessionInfo, error) {
	ss, err := s.liveSession(now, family, id)
	if err != nil {
		return SessionInfo{}, err
	}
	return ss.SessionInfo, nil
}

// liveSession finds a session of the family after processing due expiry, so
// a session past its TTL is never reported live. A session of another family
// is indistinguishable from a missing one.
func (s *State) liveSession(now time.Time, family Family, id SessionID) (*session, error) {
	s.expireDue(now)
	ss, ok := s.sessions[id]
	if ok && ss.pending != nil {
		ok = false // a moved session answers to its real id only
	}
	if !ok {
		ss, ok = s.promote(family, id)
	}
	if !ok || ss.Family != family {
		return nil, muster.Errorf(muster.CodeSessionNotFound, "the session does not exist or has ended")
	}
	return ss, nil
}

// EndReason says why a session ended.
type EndReason uint8

// Why sessions end.
const (
	EndDeleted EndReason = iota + 1
	EndExpired
	EndDropped // its family stopped being served here (placement)
)

// endSession removes a session and everything it owns in one step: its
// waiters leave their queues (answered session_not_found), then each of its
// leases is released with a SessionClosed event and granted to the next
// waiter. Requests that race the end find no session and change nothing.
func (s *State) endSession(now time.Time, ss *session, why EndReason) {
	delete(s.sessions, ss.ID)
	s.sessionDue.Remove(ss.ID)
	if ss.readOnly == 0 {
		s.use(ss.Family).Sessions--
	}
	s.unpend(ss)
	for _, w := range ss.waiters {
		s.dropWaiter(w, muster.Errorf(muster.CodeSessionNotFound, "the session ended while waiting"))
	}
	for ss.leases != nil {
		s.removeLease(now, ss.leases, SessionClosed)
	}
	for _, r := range ss.regs {
		if s.streams[r.stream] != nil {
			s.endStream(r.stream, EndSessionClosed)
		}
	}
	switch why {
	case EndExpired:
		s.stats.SessionsExpired++
	case EndDeleted:
		s.stats.SessionsDeleted++
	}
}
