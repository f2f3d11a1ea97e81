package core

import (
	"strings"
	"time"
)

// Item is the immutable public record of one held lease at one revision: the
// inventory's unit. It never carries a fencing token or a session id. A
// renewal replaces the Item (copy-on-write) rather than changing it, so an
// inventory snapshot holding the old Item keeps a consistent view.
type Item struct {
	key         string // "realm/area/resource"
	ownerID     string
	incarnation string
	acquiredAt  int64 // unix nanoseconds
	expiresAt   int64
	renewals    uint64
}

// Key is the route's ordering key "realm/area/resource".
func (it *Item) Key() string { return it.key }

// Route is the concrete route of the lease.
func (it *Item) Route() Route { return routeFromKey(it.key) }

// OwnerID is the holder session's logical owner.
func (it *Item) OwnerID() string { return it.ownerID }

// HolderIncarnation is the opaque id of the holder session.
func (it *Item) HolderIncarnation() string { return it.incarnation }

// AcquiredAt is when the holder was granted the lease.
func (it *Item) AcquiredAt() time.Time { return time.Unix(0, it.acquiredAt).UTC() }

// ExpiresAt is when the lease expires unless extended.
func (it *Item) ExpiresAt() time.Time { return time.Unix(0, it.expiresAt).UTC() }

// Renewals counts successful extends of this grant.
func (it *Item) Renewals() uint64 { return it.renewals }

// RemainingMs is the TTL left at now, never negative.
func (it *Item) RemainingMs(now time.Time) int64 {
	return max(0, (it.expiresAt-now.UnixNano())/int64(time.Millisecond))
}

// routeFromKey splits a key made by Route.Key; the parts share its memory.
func routeFromKey(key string) Route {
	realm, rest, _ := strings.Cut(key, "/")
	area, resource, _ := strings.Cut(rest, "/")
	return Route{Realm: realm, Area: area, Resource: resource}
}

// itemLess orders Items by key; the inventory B-tree uses it.
func itemLess(a, b *Item) bool { return a.key < b.key }
