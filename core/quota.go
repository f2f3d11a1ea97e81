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
func (s *State) use(fam Family) *usage {
	u := s.usage[fam]
	if u == nil {
		u = &usage{}
		s.usage[fam] = u
	}
	return u
}

// quota is fam's quota: its own entry of Config.FamilyQuotas, or else
// Config.FamilyQuota.
func (s *State) quota(fam Family) Quota {
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
		out[string(f)] = st
	}
	return out
}
