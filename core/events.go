package core

// ChangeKind is the kind of one change of the held set.
type ChangeKind uint8

// The held-set transitions. Renewal, failed, fenced, queued and timed-out
// acquisitions are not changes of the held set and produce no event.
const (
	Acquired      ChangeKind = iota + 1 // immediate grant or grant to a waiter
	Released                            // explicit release
	Expired                             // TTL passed
	SessionClosed                       // the holder session ended
	RolledBack                          // a grant whose response could not be handed over
)

var kindNames = [...]string{"", "acquired", "released", "expired", "session_closed", "rolled_back"}

func (k ChangeKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Event records one change of the held set: which route of which family,
// what happened, at which revision, and the new holder on Acquired. Events
// are produced in revision order, exactly one per change.
type Event struct {
	Family   Family
	Key      string // route key "realm/area/resource"
	Kind     ChangeKind
	Revision Revision
	Item     *Item // the new holder's record on Acquired; nil otherwise
}

// Route is the concrete route of the change.
func (e *Event) Route() Route { return routeFromKey(e.Key) }

// WaitResult is the end of one queued acquisition: a grant, or an error
// (wait_timeout, session_not_found).
type WaitResult struct {
	Ticket Ticket
	Grant  Holding
	Err    error
}

// Ready is what the steps since the last call to State.Ready produced, for
// the actor to hand out (raft's Ready): typed values, never encoded here.
// All of it is read-only, and valid until the next input to the State.
type Ready struct {
	// Results are the ends of queued acquisitions.
	Results []WaitResult
	// Events are the changes of the held set, in revision order.
	Events []Event
	// To holds, for each event, its deliveries: To[i] routes Events[i] to
	// the streams of its matching registrations. An event reaches the
	// registrations present at the end of its step, except that a step
	// that registers selectors (Subscribe) matches the events it produced
	// first: a new stream starts at its marker's revision and never sees
	// a change the marker's snapshot already holds.
	To [][]Delivery
	// Ends are the streams the core ended, in the order it ended them.
	Ends []StreamEnd
}

// Ready returns what the steps since the last call produced, with the
// deliveries of every event, and forgets it. Matching an event to its
// registrations counts it in Stats.Changes and Stats.Deliveries.
func (s *State) Ready() Ready {
	s.matchPending()
	rd := &s.ready
	rd.Results, rd.Events, rd.Ends = s.results, s.events, s.ends
	rd.To = rd.To[:0]
	start := 0
	for _, end := range s.toEnd {
		rd.To = append(rd.To, s.to[start:end:end])
		start = end
	}
	s.results = nil
	s.events, s.ends = s.events[:0], s.ends[:0]
	s.to, s.toEnd, s.matched = s.to[:0], s.toEnd[:0], 0
	return *rd
}

// matchPending computes the deliveries of the events not matched yet,
// against the registrations as they are now.
func (s *State) matchPending() {
	for ; s.matched < len(s.events); s.matched++ {
		n := len(s.to)
		s.to = s.Deliveries(&s.events[s.matched], s.to)
		s.toEnd = append(s.toEnd, len(s.to))
		s.stats.Changes++
		s.stats.Deliveries += uint64(len(s.to) - n)
	}
}
