package core

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"time"

	"github.com/musterhq/muster"
)

// Planned moves (docs/placement.md, "Planned moves keep sessions"). When
// the deployment moves a family on purpose, its owner exports the family's
// sessions and held leases (Export), the edge writes them to the claim
// store with the claim's release, and the next owner loads them (Import)
// as it starts serving. A session's id never leaves the broker: what
// travels is SHA-256 of a random salt and the id. The next owner keeps
// such a session pending, under a pseudo id that no client can present,
// until the session's client first sends its real id (promote): from then
// on it is an ordinary session. Leases keep their fencing tokens, holder
// incarnations and acquisition times; the remaining TTLs of sessions and
// leases are charged the time in transit, never lengthened.

// Handover is a family's state in transit between two owners.
type Handover struct {
	Epoch    PlacementEpoch    `json:"epoch"`   // the exporting claim's epoch
	Changes  uint64            `json:"changes"` // its changes: every token of Sessions is below Epoch+1's
	Sessions []HandoverSession `json:"sessions"`
}

// HandoverSession is one session in transit.
type HandoverSession struct {
	Salt        []byte          `json:"salt"` // SaltLen random bytes
	Key         []byte          `json:"key"`  // SHA-256(Salt ‖ id)
	OwnerID     string          `json:"owner_id"`
	Incarnation string          `json:"incarnation"`
	TTL         time.Duration   `json:"ttl"`
	Left        time.Duration   `json:"left"` // until expiry, at the export
	Leases      []HandoverLease `json:"leases"`
}

// HandoverLease is one held lease in transit.
type HandoverLease struct {
	Key        string        `json:"key"` // realm/area/resource
	Token      FencingToken  `json:"token"`
	AcquiredAt int64         `json:"acquired_at"` // unix nanoseconds
	Renewals   uint64        `json:"renewals"`
	Left       time.Duration `json:"left"`
}

// SaltLen is the length of a handover salt.
const SaltLen = 16

// handoverKey is SHA-256(salt ‖ id).
func handoverKey(salt []byte, id SessionID) [sha256.Size]byte {
	h := sha256.New()
	h.Write(salt)
	h.Write(id[:])
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// pending is what a session loaded by Import keeps until its client sends
// its real id.
type pending struct {
	salt [SaltLen]byte
	key  [sha256.Size]byte
}

// Export stops serving fam and returns its sessions and held leases, for
// the next owner. Nothing of the family stays: its waiters are refused
// with wrong_broker (the edge names the next owner), its watch streams end
// as moved, its snapshots go; no lease is released and no event is
// produced, because the leases live on at the next owner. salt (SaltLen
// bytes, random, from the edge) keys the sessions that have ids here.
func (s *State) Export(now time.Time, fam Family, salt []byte) (Handover, error) {
	if len(salt) != SaltLen {
		return Handover{}, muster.Errorf(muster.CodeInternal, "a handover salt is %d bytes", SaltLen)
	}
	if err := s.gate(now, fam); err != nil {
		return Handover{}, err
	}
	s.expireDue(now)
	f := s.families[fam]
	h := Handover{Epoch: f.place.epoch, Changes: f.place.changes}
	var moving []*session
	for _, ss := range s.sessions {
		if ss.Family == fam {
			moving = append(moving, ss)
		}
	}
	for _, ss := range moving {
		if ss.readOnly != 0 {
			s.endStream(ss.readOnly, EndMoved)
			continue
		}
		h.Sessions = append(h.Sessions, s.exportSession(now, ss, salt))
	}
	f.place.serving = false
	s.stats.FamiliesMoved++
	for _, ss := range moving {
		if ss.readOnly == 0 {
			s.forgetSession(ss)
		}
	}
	s.dropSnapshots(fam)
	return h, nil
}

// exportSession is ss in transit.
func (s *State) exportSession(now time.Time, ss *session, salt []byte) HandoverSession {
	out := HandoverSession{OwnerID: ss.OwnerID, Incarnation: ss.Incarnation, TTL: ss.TTL, Left: ss.ExpiresAt.Sub(now)}
	if ss.pending != nil {
		out.Salt, out.Key = bytes.Clone(ss.pending.salt[:]), bytes.Clone(ss.pending.key[:])
	} else {
		k := handoverKey(salt, ss.ID)
		out.Salt, out.Key = bytes.Clone(salt), k[:]
	}
	n := now.UnixNano()
	for l := ss.leases; l != nil; l = l.next {
		out.Leases = append(out.Leases, HandoverLease{Key: l.item.key, Token: l.token,
			AcquiredAt: l.item.acquiredAt, Renewals: l.item.renewals, Left: time.Duration(l.item.expiresAt - n)})
	}
	return out
}

// forgetSession removes ss and its leases without releasing them: its
// waiters are refused (wrong_broker) and its streams end as moved.
func (s *State) forgetSession(ss *session) {
	for _, w := range ss.waiters {
		s.dropWaiter(w, errWrongBroker)
	}
	for _, r := range ss.regs {
		if s.streams[r.stream] != nil {
			s.endStream(r.stream, EndMoved)
		}
	}
	for ss.leases != nil {
		l := ss.leases
		delete(l.fam.leases, l.item.key)
		l.fam.noteGone(l)
		s.leaseDue.remove(l)
		ss.removeLease(l)
	}
	delete(s.sessions, ss.ID)
	s.sessionDue.Remove(ss.ID)
	s.use(ss.Family).Sessions--
	s.unpend(ss)
}

// Import starts serving fam under the claim's epoch until the deadline,
// with the sessions and leases of h, each charged transit (the time since
// the export). The family must not be served here, and epoch must be
// above h's and above every epoch the family was served under here. h is
// checked whole before anything changes: a malformed handover changes
// nothing and fails with CodeInvalidRequest. Sessions and leases whose
// time ran out in transit are left out; quotas are not applied to what
// arrives (it was admitted by the last owner).
func (s *State) Import(now time.Time, fam Family, epoch PlacementEpoch, until time.Time, h Handover, transit time.Duration) error {
	if f := s.families[fam]; f != nil && f.place.serving {
		return muster.Errorf(muster.CodeInvalidRequest, "the family is served here already")
	}
	if epoch <= h.Epoch {
		return muster.Errorf(muster.CodeInvalidRequest, "a handover of epoch %d cannot start epoch %d", h.Epoch, epoch)
	}
	if err := s.checkHandover(h); err != nil {
		return err
	}
	if err := s.Serve(now, fam, epoch, until); err != nil {
		return err
	}
	f := s.families[fam]
	for i := range h.Sessions {
		s.importSession(now, f, &h.Sessions[i], transit)
	}
	return nil
}

// importSession loads hs as a pending session of f, unless its time ran out.
func (s *State) importSession(now time.Time, f *family, hs *HandoverSession, transit time.Duration) {
	left := hs.Left - transit
	if left <= 0 {
		return
	}
	p := &pending{}
	copy(p.salt[:], hs.Salt)
	copy(p.key[:], hs.Key)
	var id SessionID
	copy(id[:], p.key[:])
	if _, taken := s.sessions[id]; taken {
		return // 2^-128: the session is lost, nothing else is harmed
	}
	ss := &session{SessionInfo: SessionInfo{ID: id, Family: f.name, OwnerID: hs.OwnerID, Incarnation: hs.Incarnation,
		TTL: hs.TTL, ExpiresAt: now.Add(left)}, waiters: map[Ticket]*waiter{}, pending: p}
	s.sessions[id] = ss
	s.sessionDue.Set(id, ss.ExpiresAt)
	s.use(f.name).Sessions++
	if f.salts == nil {
		f.salts = map[[SaltLen]byte]int{}
	}
	f.salts[p.salt]++
	n := now.UnixNano()
	for _, hl := range hs.Leases {
		if hl.Left-transit <= 0 {
			continue
		}
		it := &Item{key: hl.Key, ownerID: ss.OwnerID, incarnation: ss.Incarnation, acquiredAt: hl.AcquiredAt,
			expiresAt: n + int64(hl.Left-transit), renewals: hl.Renewals}
		l := &lease{item: it, fam: f, holder: ss, token: hl.Token}
		f.leases[hl.Key] = l
		f.noteHeld(l)
		s.leaseDue.push(l)
		ss.addLease(l)
	}
}

// checkHandover checks every field of h: what the core relies on of a
// session and a lease, routes that parse, distinct sessions and routes,
// tokens that h's epoch could have issued.
func (s *State) checkHandover(h Handover) error {
	bad := func(what string) error {
		return muster.Errorf(muster.CodeInvalidRequest, "the handover has %s", what)
	}
	if h.Epoch == 0 || h.Epoch > MaxPlacementEpoch {
		return bad("an epoch out of range")
	}
	keys := map[[sha256.Size]byte]bool{}
	routes := map[string]bool{}
	for _, hs := range h.Sessions {
		switch {
		case len(hs.Salt) != SaltLen || len(hs.Key) != sha256.Size:
			return bad("a session key of the wrong length")
		case CheckOwnerID(hs.OwnerID) != nil:
			return bad("an invalid owner_id")
		case hs.Incarnation == "" || len(hs.Incarnation) > 64:
			return bad("an invalid holder incarnation")
		case hs.TTL < MinSessionTTL || hs.TTL > MaxSessionTTL || hs.Left > hs.TTL:
			return bad("a session TTL out of range")
		case keys[[sha256.Size]byte(hs.Key)]:
			return bad("a session twice")
		}
		keys[[sha256.Size]byte(hs.Key)] = true
		for _, hl := range hs.Leases {
			switch {
			case strings.Count(hl.Key, "/") != 2:
				return bad("an invalid route")
			case routes[hl.Key]:
				return bad("a route held twice")
			case hl.Token == 0 || uint64(hl.Token) >= uint64(h.Epoch+1)<<EpochShift:
				return bad("a fencing token its epoch could not have issued")
			case hl.Left > MaxLeaseTTL:
				return bad("a lease TTL out of range")
			}
			r := routeFromKey(hl.Key)
			if _, err := NewRoute(r.Realm, r.Area, r.Resource); err != nil {
				return bad("an invalid route")
			}
			routes[hl.Key] = true
		}
	}
	return nil
}

// promote finds the pending session of fam whose key id gives, and makes
// id its id: the first request of a moved session's client.
func (s *State) promote(fam Family, id SessionID) (*session, bool) {
	f := s.families[fam]
	if f == nil || len(f.salts) == 0 {
		return nil, false
	}
	for salt := range f.salts {
		k := handoverKey(salt[:], id)
		var pid SessionID
		copy(pid[:], k[:])
		ss := s.sessions[pid]
		if ss == nil || ss.pending == nil || ss.Family != fam || ss.pending.key != k {
			continue
		}
		if _, taken := s.sessions[id]; taken {
			return nil, false
		}
		s.unpend(ss)
		delete(s.sessions, pid)
		s.sessionDue.Remove(pid)
		ss.ID = id
		s.sessions[id] = ss
		s.sessionDue.Set(id, ss.ExpiresAt)
		s.stats.SessionsPromoted++
		return ss, true
	}
	return nil, false
}

// unpend forgets that ss is pending.
func (s *State) unpend(ss *session) {
	if ss.pending == nil {
		return
	}
	if f := s.families[ss.Family]; f != nil {
		if f.salts[ss.pending.salt]--; f.salts[ss.pending.salt] <= 0 {
			delete(f.salts, ss.pending.salt)
		}
	}
	ss.pending = nil
}

// dropSnapshots drops every retained snapshot of fam.
func (s *State) dropSnapshots(fam Family) {
	r := s.snaps
	for e := r.lru.Back(); e != nil; {
		sn := e.Value.(*Snapshot)
		e = e.Prev()
		if sn.Family == fam {
			r.drop(sn)
		}
	}
}
