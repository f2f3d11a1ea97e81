package core

import (
	"time"

	"github.com/musterhq/muster"
)

// Placement (docs/placement.md). In a placed core (Config.Placed) a family
// is served only between Serve and its serving deadline: the edge holds a
// claim on the family in PostgreSQL and moves the deadline forward after
// every renewal. At the deadline, or at Unserve, the family is dropped in
// one step: its watch streams end, its sessions end (and with them its
// leases and waiters), its snapshots go. Every command of a family that is
// not served fails with CodeWrongBroker and changes nothing.
//
// A placed family's fencing tokens and revisions are
// epoch·2^32 + n, where epoch is the claim's placement epoch and n counts
// the family's changes since Serve first saw that epoch: a broker that takes
// a family with a higher epoch issues values above everything an earlier
// holder could have issued. An unplaced core (the single-broker default)
// uses the broker-wide revision, unchanged.

// Placement bounds.
const (
	// EpochShift is where the placement epoch sits in tokens and revisions.
	EpochShift = 32
	// MaxPlacementEpoch keeps every token and revision below 2^53.
	MaxPlacementEpoch = 1<<(53-EpochShift) - 1
	// RebaseAt is the count of changes after which the edge should move the
	// claim to a new epoch (a rebase).
	RebaseAt = 1 << 31
	// familyChangesLimit is where the core stops a family that was not
	// rebased in time, leaving room for the changes of one step.
	familyChangesLimit = 1<<EpochShift - 1<<24
)

// placement is a family's serving state in a placed core.
type placement struct {
	serving bool
	until   time.Time      // serving deadline: refused at or after it
	epoch   PlacementEpoch // the claim's epoch; kept after a drop, so never reused
	changes uint64         // changes since this epoch was served
}

// FamilyPlacement is what the edge reads back: whether the family is served,
// until when, under which epoch, and how many changes its epoch has seen.
type FamilyPlacement struct {
	Serving bool
	Until   time.Time
	Epoch   PlacementEpoch
	Changes uint64
}

// Serve starts or continues serving fam under the claim's epoch until the
// deadline. A higher epoch for a served family is a rebase: its state stays,
// later values start at the new epoch. A family that is not served starts
// empty and only under an epoch above every one it was served under here.
// A deadline at or before now drops the family at once.
func (s *State) Serve(now time.Time, fam Family, epoch PlacementEpoch, until time.Time) error {
	if !s.cfg.Placed {
		return muster.Errorf(muster.CodeInternal, "placement is off in this broker")
	}
	if epoch == 0 || epoch > MaxPlacementEpoch {
		return muster.Errorf(muster.CodeInvalidRequest, "a placement epoch is 1..%d", MaxPlacementEpoch)
	}
	s.expireDue(now)
	f := s.family(fam)
	p := &f.place
	switch {
	case p.serving && epoch == p.epoch:
	case epoch > p.epoch:
		p.epoch, p.changes = epoch, 0
	default:
		return muster.Errorf(muster.CodeInvalidRequest, "placement epoch %d is not above %d", epoch, p.epoch)
	}
	p.serving, p.until = true, until
	if s.placeNext.IsZero() || until.Before(s.placeNext) {
		s.placeNext = until
	}
	s.dropDueFamilies(now)
	return nil
}

// Unserve stops serving fam now (a planned move): the family is dropped.
func (s *State) Unserve(now time.Time, fam Family) {
	if f := s.families[fam]; f != nil && f.place.serving {
		s.dropFamily(now, f)
	}
}

// Placement reports fam's serving state.
func (s *State) Placement(now time.Time, fam Family) FamilyPlacement {
	s.expireDue(now)
	f := s.families[fam]
	if f == nil {
		return FamilyPlacement{}
	}
	p := f.place
	return FamilyPlacement{Serving: p.serving, Until: p.until, Epoch: p.epoch, Changes: p.changes}
}

// gate refuses a command of a family this core does not serve now.
func (s *State) gate(now time.Time, fam Family) error {
	if !s.cfg.Placed {
		return nil
	}
	s.dropDueFamilies(now)
	if f := s.families[fam]; f != nil && f.place.serving {
		return nil
	}
	return errWrongBroker
}

var errWrongBroker = muster.Errorf(muster.CodeWrongBroker, "this broker does not serve the family")

// dropDueFamilies drops every served family whose deadline is not after
// now, or whose changes reached the limit (a rebase that did not come).
func (s *State) dropDueFamilies(now time.Time) {
	if !s.cfg.Placed || s.placeNext.IsZero() || now.Before(s.placeNext) && !s.placeFull {
		return
	}
	s.placeNext, s.placeFull = time.Time{}, false
	for _, f := range s.families {
		p := &f.place
		if !p.serving {
			continue
		}
		if !now.Before(p.until) || p.changes >= familyChangesLimit {
			s.dropFamily(now, f)
			continue
		}
		if s.placeNext.IsZero() || p.until.Before(s.placeNext) {
			s.placeNext = p.until
		}
	}
}

// dropFamily ends everything of f in one step: streams of read-only
// sessions end as shutdown, waiters are refused (wrong_broker), then every
// session ends (leases released with SessionClosed events, bound streams
// session_closed),
// then the family's snapshots go. The family is left empty and unserved.
func (s *State) dropFamily(now time.Time, f *family) {
	f.place.serving = false
	s.stats.FamiliesDropped++
	var gone []*session
	for _, ss := range s.sessions {
		if ss.Family == f.name {
			gone = append(gone, ss)
		}
	}
	for _, ss := range gone {
		if ss.readOnly != 0 {
			s.endStream(ss.readOnly, EndShutdown)
		}
	}
	// Waiters first, so that no lease ending below is granted to one.
	for _, ss := range gone {
		for _, w := range ss.waiters {
			s.dropWaiter(w, errWrongBroker)
		}
	}
	for _, ss := range gone {
		if _, live := s.sessions[ss.ID]; live {
			s.endSession(now, ss, EndDropped)
		}
	}
	s.dropSnapshots(f.name)
}

// famRev is the revision a family's clients see now: the broker revision
// in an unplaced core, epoch·2^32 + changes in a placed one.
func (s *State) famRev(f *family) Revision {
	if !s.cfg.Placed || f == nil {
		return s.revision
	}
	return Revision(uint64(f.place.epoch)<<EpochShift + f.place.changes)
}

// famRevOf is famRev by name.
func (s *State) famRevOf(fam Family) Revision { return s.famRev(s.families[fam]) }

// bump commits one change of f: the broker revision and the family's count
// advance, and the family's new revision is returned.
func (s *State) bump(f *family) Revision {
	s.revision++
	if s.cfg.Placed {
		f.place.changes++
		if f.place.changes >= familyChangesLimit {
			s.placeFull = true
		}
	}
	return s.famRev(f)
}
