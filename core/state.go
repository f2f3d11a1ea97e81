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
	// MaxSessions bounds live sessions across all families.
	MaxSessions int
}

// DefaultMaxSessions is the default for Config.MaxSessions.
const DefaultMaxSessions = 100_000

// Stats are counters and gauges read by the metrics layer.
type Stats struct {
	Sessions        int
	SessionsCreated uint64
	SessionsExpired uint64
	SessionsDeleted uint64
	Revision        uint64
}

// State is the whole lease universe of one epoch.
type State struct {
	cfg        Config
	revision   uint64
	sessions   map[SessionID]*session
	sessionDue *deadlines[SessionID]
	stats      Stats
}

// NewState returns an empty universe.
func NewState(cfg Config) *State {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	return &State{
		cfg:        cfg,
		sessions:   make(map[SessionID]*session),
		sessionDue: newDeadlines[SessionID](),
	}
}

// Epoch is the id of this universe's lifetime.
func (s *State) Epoch() string { return s.cfg.Epoch }

// Revision is the current revision.
func (s *State) Revision() uint64 { return s.revision }

// Tick processes everything due at now: session expiry.
func (s *State) Tick(now time.Time) { s.expireDue(now) }

// expireDue ends every session whose TTL has passed. A session is due when
// now is strictly after its expiry: TTL is a lower bound, never early.
func (s *State) expireDue(now time.Time) {
	for {
		id, ok := s.sessionDue.PopDue(now.Add(-time.Nanosecond))
		if !ok {
			return
		}
		if ss, live := s.sessions[id]; live {
			s.endSession(ss, EndExpired)
		}
	}
}

// Stats returns a copy of the counters.
func (s *State) Stats() Stats {
	st := s.stats
	st.Sessions = len(s.sessions)
	st.Revision = s.revision
	return st
}
