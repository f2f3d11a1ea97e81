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
	Family   string
	Key      string // route key "realm/area/resource"
	Kind     ChangeKind
	Revision uint64
	Item     *Item // the new holder's record on Acquired; nil otherwise
}

// Route is the concrete route of the change.
func (e *Event) Route() Route { return routeFromKey(e.Key) }

// WaitResult is the end of one queued acquisition: a grant, or an error
// (wait_timeout, session_not_found).
type WaitResult struct {
	Ticket uint64
	Grant  Holding
	Err    error
}
