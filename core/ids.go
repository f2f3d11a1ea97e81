package core

// The core's identifiers. Each is its own type, so that a family cannot be
// passed where a caller name is expected, nor a fencing token where a
// revision or a ticket is (etcd's LeaseID is the model). On the wire they
// keep their plain forms: a Family is its name, the numbers are decimal
// JSON numbers; the edge converts at its boundary.

// Family names one tenant's lease universe in the broker: the family of the
// caller's token. Sessions, leases, waiters, watch registrations and
// snapshots of two families never meet.
type Family string

// Revision is a position in a family's history of held-set changes: every
// change advances it by one. In an unplaced core it is the broker-wide
// revision; in a placed core a family's revisions are epoch·2^32 + n (see
// placement.go). Reads (snapshots, lookups, watch markers) report the
// revision they were read at.
type Revision uint64

// FencingToken is the token of one grant: the revision at which the lease
// was granted. It stays the same across renewals; extends and releases must
// present it, and a resource guarded by the lease refuses a lower one.
type FencingToken uint64

// Ticket names one queued acquisition until its WaitResult is produced.
type Ticket uint64

// SnapshotID names an open inventory snapshot of the broker; 0 names none
// (an unregistered view, see HeldView).
type SnapshotID uint64

// PlacementEpoch is the epoch of a family's placement claim; a broker that
// takes a family under a higher epoch issues tokens and revisions above
// everything an earlier holder could have issued.
type PlacementEpoch uint64
