package core

import (
	"strconv"
	"time"

	"github.com/musterhq/muster"
)

// Watch limits (design §7).
const (
	MaxWildcardRegistrations = 128  // per session; exact ones are exempt
	MaxRegistrations         = 1024 // per session, exact and wildcard
	MaxSelectorsPerStream    = 32
	WatchPageLimit           = 100 // items per selector in the marker
	WatchPageBytes           = 64 << 10
)

// StreamID names one watch stream at the edge; the core only routes to it.
type StreamID uint64

// registration is one (session, original selector string) pair receiving
// change events on one stream.
type registration struct {
	id     string
	sel    Selector
	sess   *session
	stream StreamID
	stamp  uint64 // last match call that reported it
}

// watchIndex is one family's subscription index.
type watchIndex struct {
	exact map[string][]*registration // by route key
	trie  trieNode
}

// stream is what the core knows of a watch stream.
type stream struct {
	sess *session
	regs map[*registration]struct{}
}

// Delivery routes one change event to one registration's stream.
type Delivery struct {
	Stream         StreamID
	SubscriptionID string
}

// StreamEnd tells the edge to end a stream with a terminal event.
type StreamEnd struct {
	Stream StreamID
	Reason StreamEndReason
}

// StreamEndReason is why a stream ends.
type StreamEndReason uint8

// Terminal reasons decided by the core; overflow and shutdown are decided
// at the edge.
const (
	EndSuperseded StreamEndReason = iota + 1
	EndUnsubscribed
	EndSessionClosed
	// EndShutdown: the family stopped being served here (placement); the
	// edge also ends streams as shutdown when the process stops.
	EndShutdown
	// EndMoved: the family moved to another broker in a planned move
	// (handover.go); its sessions and leases live on there.
	EndMoved
)

var endNames = [...]string{"", "superseded", "unsubscribed", "session_closed", "shutdown", "moved"}

func (r StreamEndReason) String() string { return endNames[r] }

// WatchSubscription is one registration of a new stream with the first page
// of its selector's snapshot.
type WatchSubscription struct {
	ID       string
	Selector Selector
	Page     PageResult
}

// WatchStart is what opening a stream produces: the snapshot every page was
// read from (at the revision of the marker) and the subscriptions. It is a
// typed value the edge encodes, off the actor: nothing in it is changed
// once Subscribe has returned it.
type WatchStart struct {
	Revision      Revision
	Time          time.Time // of the step: remaining_ms is measured at it
	Snapshot      *Snapshot
	Subscriptions []WatchSubscription
}

func (s *State) index(fam Family) *watchIndex {
	ix := s.watch[fam]
	if ix == nil {
		ix = &watchIndex{exact: map[string][]*registration{}}
		s.watch[fam] = ix
	}
	return ix
}

// SubscribeRequest registers the Selectors of one new stream.
type SubscribeRequest struct {
	Family    Family
	Session   *SessionID // nil: a read-only session for the stream
	Anon      SessionID  // the read-only session's fresh random id
	Selectors []Selector // validated and authorized by the caller
	Caller    string     // owner of the marker snapshot (per-caller cap)
}

// Subscribe registers req.Selectors for the new stream st, in one step, and
// takes the snapshot whose first pages make the stream's marker. The
// session is the live session req.Session of the family, or — when it is
// nil — a new read-only session (with the fresh id req.Anon) that lives
// exactly as long as the stream.
// Limits are checked before anything changes (all or nothing), duplicates
// first: a (session, selector) already registered moves to the new stream
// with its subscription id, and its old stream ends as superseded.
//
// The changes made before the registrations change, by this step's due
// expiry included, are matched first (see Ready): they are in the marker's
// snapshot, so they reach the registrations as they were, never the new
// stream.
func (s *State) Subscribe(now time.Time, st StreamID, req SubscribeRequest) (WatchStart, error) {
	fam, id, sels := req.Family, req.Session, req.Selectors
	if len(sels) == 0 || len(sels) > MaxSelectorsPerStream {
		return WatchStart{}, muster.Errorf(muster.CodeInvalidRequest, "a stream watches 1..%d selectors", MaxSelectorsPerStream)
	}
	s.expireDue(now)
	s.matchPending()
	u, q := s.use(fam), s.quota(fam)
	if over(u.Streams, 1, q.Streams) {
		s.stats.SubscriptionLimit++
		u.StreamsRefused++
		return WatchStart{}, muster.LimitErrorf(muster.CodeSubscriptionLimit, muster.ScopeFamily, "the family holds its quota of %d watch streams", q.Streams)
	}
	if len(s.streams) >= s.cfg.MaxStreams {
		s.stats.SubscriptionLimit++
		return WatchStart{}, muster.LimitErrorf(muster.CodeSubscriptionLimit, muster.ScopeBroker, "the broker holds its maximum of %d watch streams", s.cfg.MaxStreams)
	}
	var ss *session
	if id != nil {
		var err error
		if ss, err = s.liveSession(now, fam, *id); err != nil {
			return WatchStart{}, err
		}
	}
	// Limits: count what is new, duplicates first.
	uniq := make([]Selector, 0, len(sels))
	seen := map[string]bool{}
	newWild, newAll := 0, 0
	for _, sel := range sels {
		if seen[sel.String()] {
			continue
		}
		seen[sel.String()] = true
		uniq = append(uniq, sel)
		if ss != nil && ss.regs[sel.String()] != nil {
			continue
		}
		newAll++
		if !sel.IsExact() {
			newWild++
		}
	}
	if ss != nil && (ss.wildcards+newWild > MaxWildcardRegistrations || len(ss.regs)+newAll > MaxRegistrations) {
		s.stats.SubscriptionLimit++
		return WatchStart{}, muster.LimitErrorf(muster.CodeSubscriptionLimit, muster.ScopeSession, "a session holds at most %d wildcard and %d registrations in all", MaxWildcardRegistrations, MaxRegistrations)
	}
	if over(u.Registrations, newAll, q.Registrations) {
		s.stats.SubscriptionLimit++
		u.RegistrationsRefused++
		return WatchStart{}, muster.LimitErrorf(muster.CodeSubscriptionLimit, muster.ScopeFamily, "the family holds its quota of %d watch registrations", q.Registrations)
	}
	if over(s.stats.ExactRegistrations+s.stats.WildcardRegistrations, newAll, s.cfg.MaxRegistrations) {
		s.stats.SubscriptionLimit++
		return WatchStart{}, muster.LimitErrorf(muster.CodeSubscriptionLimit, muster.ScopeBroker, "the broker holds its maximum of %d watch registrations", s.cfg.MaxRegistrations)
	}
	if ss == nil {
		ss = s.readOnlySession(now, fam, req.Anon, st)
	}
	str := &stream{sess: ss, regs: map[*registration]struct{}{}}
	s.streams[st] = str
	u.Streams++
	sn := s.OpenSnapshot(now, fam, req.Caller)
	out := WatchStart{Revision: sn.Revision, Time: now, Snapshot: sn}
	ix := s.index(fam)
	for _, sel := range uniq {
		r := ss.regs[sel.String()]
		if r != nil {
			s.moveRegistration(r, st)
			s.stats.Supersedes++
		} else {
			r = s.addRegistration(ix, ss, sel, st)
		}
		str.regs[r] = struct{}{}
		page := sn.Page(sel, "", Budget{Limit: WatchPageLimit, Bytes: WatchPageBytes, Examined: DefaultExaminedBudget})
		out.Subscriptions = append(out.Subscriptions, WatchSubscription{ID: r.id, Selector: sel, Page: page})
	}
	return out, nil
}

// readOnlySession makes the session of a stream opened without one: no
// TTL, no leases, ended with the stream.
func (s *State) readOnlySession(now time.Time, fam Family, id SessionID, st StreamID) *session {
	ss := &session{SessionInfo: SessionInfo{ID: id, Family: fam, OwnerID: "stream", Incarnation: incarnation(s.cfg.IncarnationKey, id)},
		waiters: map[Ticket]*waiter{}, readOnly: st}
	s.sessions[id] = ss
	s.readOnly++
	return ss
}

func (s *State) addRegistration(ix *watchIndex, ss *session, sel Selector, st StreamID) *registration {
	s.nextSub++
	r := &registration{id: "sub-" + strconv.FormatUint(s.nextSub, 10), sel: sel, sess: ss, stream: st}
	if route, ok := sel.Route(); ok {
		key := route.Key()
		ix.exact[key] = append(ix.exact[key], r)
		s.stats.ExactRegistrations++
	} else {
		ix.trie.insert(sel.Segments(), r)
		ss.wildcards++
		s.stats.WildcardRegistrations++
	}
	if ss.regs == nil {
		ss.regs = map[string]*registration{}
	}
	ss.regs[sel.String()] = r
	s.use(ss.Family).Registrations++
	return r
}

// moveRegistration hands r to stream st; the stream it leaves ends as
// superseded, and that stream's other registrations are removed with it.
func (s *State) moveRegistration(r *registration, st StreamID) {
	old := r.stream
	if o := s.streams[old]; o != nil {
		delete(o.regs, r)
		s.endStream(old, EndSuperseded)
	}
	r.stream = st
}

func (s *State) removeRegistration(r *registration) {
	ix := s.index(r.sess.Family)
	if route, ok := r.sel.Route(); ok {
		key := route.Key()
		list := ix.exact[key]
		for i, x := range list {
			if x == r {
				list[i] = list[len(list)-1]
				list = list[:len(list)-1]
				break
			}
		}
		if len(list) == 0 {
			delete(ix.exact, key)
		} else {
			ix.exact[key] = list
		}
		s.stats.ExactRegistrations--
	} else {
		ix.trie.remove(r.sel.Segments(), r)
		r.sess.wildcards--
		s.stats.WildcardRegistrations--
	}
	delete(r.sess.regs, r.sel.String())
	s.use(r.sess.Family).Registrations--
	if str := s.streams[r.stream]; str != nil {
		delete(str.regs, r)
	}
}

// endStream removes a stream and its registrations and, unless the edge
// already knows (reason 0), asks the edge to end it with reason.
func (s *State) endStream(st StreamID, reason StreamEndReason) {
	str := s.streams[st]
	if str == nil {
		return
	}
	delete(s.streams, st)
	s.use(str.sess.Family).Streams--
	for r := range str.regs {
		s.removeRegistration(r)
	}
	if str.sess.readOnly == st {
		delete(s.sessions, str.sess.ID)
		s.readOnly--
	}
	if reason != 0 {
		s.ends = append(s.ends, StreamEnd{Stream: st, Reason: reason})
	}
}

// DropStream forgets a stream the edge has finished (client gone, overflow,
// shutdown): its registrations and its read-only session go with it.
func (s *State) DropStream(st StreamID) { s.endStream(st, 0) }

// Overflowed forgets a stream that refused a change (its queue was full:
// a slow reader), like DropStream, and counts it in Stats.Overflows.
func (s *State) Overflowed(st StreamID) {
	s.stats.Overflows++
	s.endStream(st, 0)
}

// Unsubscribe removes exactly the registration (session, selector). A
// stream left with none ends as unsubscribed. Removing a registration that
// does not exist succeeds.
func (s *State) Unsubscribe(now time.Time, fam Family, id SessionID, sel Selector) error {
	ss, err := s.liveSession(now, fam, id)
	if err != nil {
		return err
	}
	r := ss.regs[sel.String()]
	if r == nil {
		return nil
	}
	st := r.stream
	s.removeRegistration(r)
	if str := s.streams[st]; str != nil && len(str.regs) == 0 {
		s.endStream(st, EndUnsubscribed)
	}
	return nil
}

// Deliveries appends the deliveries of one change event: one per matching
// registration of the event's family, exact and wildcard alike.
func (s *State) Deliveries(e *Event, out []Delivery) []Delivery {
	ix := s.watch[e.Family]
	if ix == nil {
		return out
	}
	for _, r := range ix.exact[e.Key] {
		out = append(out, Delivery{Stream: r.stream, SubscriptionID: r.id})
	}
	r := routeFromKey(e.Key)
	segs := [3]string{r.Realm, r.Area, r.Resource}
	s.matchStamp++
	ix.trie.match(segs[:], 0, s.matchStamp, func(r *registration) {
		out = append(out, Delivery{Stream: r.stream, SubscriptionID: r.id})
	})
	return out
}

// TakeStreamEnds returns the stream ends produced since the last call.
func (s *State) TakeStreamEnds() []StreamEnd {
	e := s.ends
	s.ends = s.ends[:0]
	return e
}
