// Package core is Muster's lease state machine: sessions, leases, selectors,
// authorization containment, the subscription index and inventory snapshots.
//
// State is synchronous and not safe for concurrent use: it takes every input,
// the time included, as an argument, performs no I/O and starts no goroutine.
// Broker wraps one State in one goroutine (the actor) and is what the rest of
// the program talks to.
package core

import "time"

// Config fixes the limits and secrets of one broker lifetime (epoch).
type Config struct {
	// Epoch is the random id of this broker process lifetime.
	Epoch string
	// IncarnationKey keys holder incarnations; random per epoch.
	IncarnationKey []byte
	// MaxSessions bounds live sessions across all families; the read-only
	// sessions of watch streams are bounded by MaxStreams instead.
	MaxSessions int
	// MaxStreams bounds open watch streams across all families.
	MaxStreams int
	// MaxRegistrations bounds watch registrations across all families.
	MaxRegistrations int
	// MaxWaiters bounds queued acquisitions across all families.
	MaxWaiters int
	// FamilyQuota bounds each family (zero fields: no bound of its own);
	// FamilyQuotas replaces it for the families it names.
	FamilyQuota  Quota
	FamilyQuotas map[Family]Quota
	// Inventory snapshot retention; zero values take the defaults.
	MaxSnapshots       int
	MaxCallerSnapshots int
	SnapshotIdle       time.Duration
	// Placed: families are served only while the edge holds their claims
	// (Serve); every command of another family fails with wrong_broker,
	// and tokens and revisions carry the placement epoch (placement.go).
	Placed bool
}

// Defaults of Config.
const (
	DefaultMaxSessions = 100_000
	DefaultMaxStreams  = 10_000
)

// Stats are counters and gauges read by the metrics layer.
type Stats struct {
	Sessions        int
	SessionsCreated uint64
	SessionsExpired uint64
	SessionsDeleted uint64
	Revision        uint64 // the broker-wide revision

	Leases  int // held leases, all families
	Waiters int // queued acquisitions

	AcquireGranted          uint64 // free → granted at once
	AcquireGrantedAfterWait uint64 // granted to a waiter
	AcquireAlreadyHeld      uint64
	AcquireHeld             uint64 // lease_held
	AcquireQueued           uint64
	AcquireAlreadyQueued    uint64
	AcquireQueueFull        uint64
	AcquireWaitTimeout      uint64
	WaitCancelled           uint64 // the requester left while waiting
	Renewals                uint64
	Releases                uint64
	Expiries                uint64
	Rejected                uint64 // extend/release refused: fenced or not_owner
	Rollbacks               uint64

	ExactRegistrations    int
	WildcardRegistrations int
	Streams               int
	Supersedes            uint64
	Changes               uint64 // held-set changes fanned out
	Deliveries            uint64 // change events offered to streams
	Overflows             uint64 // streams dropped because they refused an event
	SubscriptionLimit     uint64 // opens refused by the registration caps

	FamiliesDropped  uint64 // families dropped by placement (deadline, failed move)
	FamiliesMoved    uint64 // families exported in a planned move (handover.go)
	SessionsPromoted uint64 // moved sessions whose client has sent their id here

	Snapshots        int // open inventory snapshots
	SnapshotsTaken   uint64
	SnapshotsEvicted uint64 // by the caps
	SnapshotsExpired uint64 // by the idle timeout

	Families map[string]FamilyStats // by family name, for quotas
}

// State is the whole lease universe of one epoch.
type State struct {
	cfg        Config
	revision   Revision
	sessions   map[SessionID]*session
	sessionDue *deadlines[SessionID]
	families   map[Family]*family
	leaseDue   leaseHeap
	waiters    map[Ticket]*waiter
	waitDue    *deadlines[Ticket]
	nextTicket Ticket
	snaps      *snapshots
	watch      map[Family]*watchIndex
	streams    map[StreamID]*stream
	nextSub    uint64
	readOnly   int // read-only stream sessions among sessions
	matchStamp uint64
	stats      Stats
	usage      map[Family]*usage // per family, for quotas and metrics
	placeNext  time.Time         // earliest serving deadline (placed core)
	placeFull  bool              // a family reached its change limit

	// Outputs of the current step, drained by the actor after each step
	// (see Ready).
	events  []Event
	results []WaitResult
	ends    []StreamEnd
	to      []Delivery // deliveries of events[:matched], in event order
	toEnd   []int      // toEnd[i]: end of events[i]'s deliveries in to
	matched int        // events whose deliveries are in to
	ready   Ready      // reused by Ready
}

// NewState returns an empty universe.
func NewState(cfg Config) *State {
	cfg = cfg.withDefaults()
	return &State{
		cfg:        cfg,
		sessions:   make(map[SessionID]*session),
		sessionDue: newDeadlines[SessionID](),
		families:   make(map[Family]*family),
		waiters:    make(map[Ticket]*waiter),
		waitDue:    newDeadlines[Ticket](),
		snaps:      newSnapshots(cfg.MaxSnapshots, cfg.MaxCallerSnapshots, cfg.SnapshotIdle),
		watch:      make(map[Family]*watchIndex),
		streams:    make(map[StreamID]*stream),
		usage:      make(map[Family]*usage),
	}
}

// withDefaults is c with every unset limit at its default.
func (c Config) withDefaults() Config {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxRegistrations <= 0 {
		c.MaxRegistrations = DefaultMaxRegistrations
	}
	if c.MaxWaiters <= 0 {
		c.MaxWaiters = DefaultMaxWaiters
	}
	if c.MaxSnapshots <= 0 {
		c.MaxSnapshots = DefaultMaxSnapshots
	}
	if c.MaxCallerSnapshots <= 0 {
		c.MaxCallerSnapshots = DefaultCallerSnapshots
	}
	if c.SnapshotIdle <= 0 {
		c.SnapshotIdle = DefaultSnapshotIdle
	}
	return c
}

// Epoch is the id of this universe's lifetime.
func (s *State) Epoch() string { return s.cfg.Epoch }

// Revision is the current revision.
func (s *State) Revision() Revision { return s.revision }

// Tick processes everything due at now, idle snapshots included.
func (s *State) Tick(now time.Time) {
	s.expireDue(now)
	s.snaps.expireIdle(now, &s.stats)
}

// expireDue processes everything due at now, in this order: sessions whose
// TTL passed end (with their leases and waiters), leases whose TTL passed
// expire, waits whose wait_ms passed time out. Something is due when now is
// strictly after its deadline: TTL is a lower bound, never early. Every
// command runs this first, so nothing due is ever reported live.
func (s *State) expireDue(now time.Time) {
	s.dropDueFamilies(now)
	for {
		id, ok := s.sessionDue.PopDue(now.Add(-time.Nanosecond))
		if !ok {
			break
		}
		if ss, live := s.sessions[id]; live {
			s.endSession(now, ss, EndExpired)
		}
	}
	s.expireLeases(now)
	s.timeoutWaiters(now)
}

// TakeEvents returns the events produced since the last call, in revision
// order, and forgets them. The slice is reused: it is valid until the next
// input to the State.
// Their deliveries, if any were matched, are forgotten with them.
func (s *State) TakeEvents() []Event {
	ev := s.events
	s.events = s.events[:0]
	s.to, s.toEnd, s.matched = s.to[:0], s.toEnd[:0], 0
	return ev
}

// TakeResults returns the wait results produced since the last call.
func (s *State) TakeResults() []WaitResult {
	r := s.results
	s.results = nil
	return r
}

// Stats returns a copy of the counters.
func (s *State) Stats() Stats {
	st := s.stats
	st.Sessions = len(s.sessions) - s.readOnly
	st.Revision = uint64(s.revision)
	st.Leases = len(s.leaseDue)
	st.Waiters = len(s.waiters)
	st.Snapshots = len(s.snaps.byID)
	st.Streams = len(s.streams)
	st.Families = s.FamilyStats()
	return st
}
