package core

import "maps"

// SetLimits replaces the broker-wide caps, the family quotas and the
// snapshot retention with l's (unset ones take their defaults, as in
// NewState); the rest of l (Epoch, IncarnationKey, Placed) is ignored: those
// belong to the epoch and never change.
//
// Nothing that exists is ended or evicted by it: every cap and quota is
// compared with the counts when something new is admitted (a session, a
// stream, a registration, a waiter, a snapshot), so a lowered limit refuses
// new work until the counts are below it again, and a raised one admits
// more at once. A family over a lowered snapshot quota loses one snapshot
// per new one it takes, as at the quota. The step reads no clock and
// changes no lease, so it takes no time and emits no event.
func (s *State) SetLimits(l Config) {
	l = l.withDefaults()
	c := &s.cfg
	c.MaxSessions, c.MaxStreams, c.MaxRegistrations, c.MaxWaiters = l.MaxSessions, l.MaxStreams, l.MaxRegistrations, l.MaxWaiters
	c.FamilyQuota, c.FamilyQuotas = l.FamilyQuota, maps.Clone(l.FamilyQuotas)
	c.MaxSnapshots, c.MaxCallerSnapshots, c.SnapshotIdle = l.MaxSnapshots, l.MaxCallerSnapshots, l.SnapshotIdle
	s.snaps.max, s.snaps.perLimit, s.snaps.idle = l.MaxSnapshots, l.MaxCallerSnapshots, l.SnapshotIdle
}

// Limits returns the limits in force (the limit fields of the Config).
func (s *State) Limits() Config {
	c := s.cfg
	c.Epoch, c.IncarnationKey, c.Placed = "", nil, false
	return c
}
