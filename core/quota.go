package core

// Quota bounds what one family may hold at once, so that no family can take
// a whole broker-wide cap from the others. A zero field sets no bound of
// the family's own: only the broker-wide cap applies.
type Quota struct {
	Sessions      int // live sessions (read-only stream sessions are streams)
	Streams       int // open watch streams, with or without a session
	Registrations int // watch registrations, exact and wildcard
	Snapshots     int // retained inventory snapshots (at the quota the family's own oldest is evicted)
	Waiters       int // queued acquisitions
}

// Broker-wide defaults of the caps Config adds to MaxSessions and
// MaxStreams.
const (
	DefaultMaxRegistrations = 1_000_000
	DefaultMaxWaiters       = 100_000
)

// Scope says which bound a limit error hit. The HTTP layer sends it as the
// problem's `scope` member beside the code.
type Scope string

// The scopes of limit errors.
const (
	ScopeBroker  Scope = "broker"  // a broker-wide cap, shared by all families
	ScopeFamily  Scope = "family"  // the caller's family's quota
	ScopeSession Scope = "session" // a per-session bound (registrations)
	ScopeRoute   Scope = "route"   // a per-route bound (waiters)
	ScopeRoot    Scope = "root"    // a per-fleet-root bound (specs)
)

// LimitErrorf builds a limit *Error with its scope.
func LimitErrorf(code Code, scope Scope, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Scope = scope
	return e
}

// FamilyStats are one family's counts, for the per-family metrics.
type FamilyStats struct {
	Sessions      int
	Streams       int
	Registrations int
	Snapshots     int
	Waiters       int

	// Refusals by the family's own quota (not by broker-wide caps).
	SessionsRefused      uint64
	StreamsRefused       uint64
	RegistrationsRefused uint64
	WaitersRefused       uint64
	SnapshotsEvicted     uint64 // evicted to keep the family within its quota
}

// usage is the mutable form of FamilyStats, one per family seen.
type usage = FamilyStats

// use returns fam's usage record, creating it.
func (s *State) use(fam string) *usage {
	u := s.usage[fam]
	if u == nil {
		u = &usage{}
		s.usage[fam] = u
	}
	return u
}

// quota is fam's quota: its own entry of Config.FamilyQuotas, or else
// Config.FamilyQuota.
func (s *State) quota(fam string) Quota {
	if q, ok := s.cfg.FamilyQuotas[fam]; ok {
		return q
	}
	return s.cfg.FamilyQuota
}

// over reports whether adding n to have would pass limit (0: unbounded).
func over(have, n, limit int) bool { return limit > 0 && have+n > limit }

// FamilyStats returns a copy of every family's counts.
func (s *State) FamilyStats() map[string]FamilyStats {
	out := make(map[string]FamilyStats, len(s.usage))
	for f, u := range s.usage {
		st := *u
		st.Snapshots = s.snaps.perFam[f]
		out[f] = st
	}
	return out
}
