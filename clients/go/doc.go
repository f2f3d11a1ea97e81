// Package muster is the Go SDK of Muster, a lease broker for worker fleets.
//
// A Client talks to one broker. Through it:
//
//   - Sessions and leases: Client.NewSession creates a worker's session and
//     keeps it alive in the background; Session.Acquire grants an exact lease
//     (lease://realm/area/resource) as a *Lease with Extend, Release,
//     FencingToken and Lost; Session.WithLease runs a function while holding a
//     lease, renewing it at TTL/3 and cancelling the function's context when
//     the lease is lost.
//   - Inventory: Client.List iterates over the held leases matching a
//     selector (lease://acme/renderers/*, lease://acme/**, …), one request per
//     page, from one snapshot.
//   - Watch streams: Client.Watch and Session.Watch open a Server-Sent-Events
//     stream whose first event (the Marker) is a snapshot, then deliver
//     changes.
//   - The observer: Client.Observe keeps a live, advisory view of a selector
//     and owns the whole bootstrap and every recovery. Use it rather than
//     Watch + List by hand.
//   - Fleets: Client.Fleet gives the desired set of a fleet root (Register,
//     Forget, Desired, Sweep with a Go validator, Plan, Gap).
//
// # What a caller may rely on
//
// Observation never grants ownership. Items and changes are plain values
// (Item, Change) without fencing tokens or session ids, and nothing in this
// package turns them into a *Lease: only Session.Acquire does. Seeing that a
// route is held, or by whom, gives no power to extend, release or take it.
//
// The observed inventory is advisory and can be stale at any moment.
// Changes are hints: the broker neither replays nor acknowledges them. A
// lost notification, a dropped connection, a broker restart (a new epoch,
// which is a new, empty lease universe), a slow consumer's overflow or a
// superseded stream each invalidate a view: the observer then reports not
// ready and rebuilds at once (resubscribe, then relist). Even while
// subscribed it relists periodically (ReconcileInterval, jittered), so that a
// fleet never trusts a view that only events kept up to date. A long-running
// fleet manager that does not use the observer must do the same.
//
// Every worker of one observed inventory must talk to the same broker
// process and the same family (token): separate brokers are separate lease
// universes. After a broker restart every session is gone (ErrSessionLost),
// every lease is lost, and fencing tokens start over: they are comparable
// only for one route within one epoch.
//
// A token whose grant covers several realms (lease://*/renderers/*#read)
// discloses across those realms which routes are held and the owner ids and
// holder incarnations of their holders: grant the narrowest pattern that
// serves the worker.
//
// # Errors
//
// Every broker error is an *Error with the contract's stable Code; compare
// with errors.Is against the sentinels (errors.Is(err, ErrFenced)). Advice
// tells whether and how to retry; each sentinel's comment says the same.
//
// # Concurrency
//
// Client, Session, Lease, Subscription and Observer are safe for concurrent
// use. Session, Subscription and Observer run background goroutines that
// end with Close (or, for Subscription and Observer, with the context given
// to Watch or Observe); a Lease runs only a timer for its local deadline,
// and WithLease one renewal goroutine until it returns. Close never blocks on the network beyond its own request
// (Session.Close sends one DELETE; Subscription.Close and Observer.Close
// send nothing and cancel what is in flight).
package muster
