package muster

import (
	"errors"
	"net/http"
)

// Code is a stable error code of the Muster contract: the `code` member of
// every problem body. Codes are append-only and never renamed; a broker newer
// than this SDK may answer a code it does not list, which still reaches the
// caller as an *Error with that Code.
type Code string

// Error is an error answered by the broker (an RFC 9457 problem body), or a
// request the SDK refused locally with the code the broker would have used
// (Status is then 0).
//
// Compare with errors.Is against the sentinels below: errors.Is(err,
// ErrFenced) holds for every *Error whose Code is "fenced", whatever its
// Status or Detail. Use errors.As to read Detail.
type Error struct {
	Code   Code
	Status int    // the HTTP status, 0 for a local refusal
	Title  string // the problem's title, e.g. "Conflict"
	Detail string // a human-readable explanation; never contains a secret
	// Scope, on a limit (429), is the bound that was hit: "broker" (a cap
	// shared by every family), "family" (the caller's family's quota),
	// "session", "route" or "root". Empty otherwise.
	Scope string
	// Owner, on wrong_broker (421), is the base URL of the broker that
	// serves the caller's family. The client follows it by itself (see
	// WithoutFollow); it is set on the error only when following failed.
	Owner string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return "muster: " + string(e.Code)
	}
	return "muster: " + string(e.Code) + ": " + e.Detail
}

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, ErrLeaseHeld) matches any lease_held answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Retry is the SDK's advice for what to do after an error; see Advice.
type Retry int

const (
	// RetryNo: the same request fails again. Fix the input, the
	// configuration or the grants.
	RetryNo Retry = iota
	// RetryBackoff: the same request may succeed later; retry with
	// exponential backoff and jitter.
	RetryBackoff
	// RetryRestart: the state the request relied on is gone (a lease, a
	// session, a cursor's snapshot, a broker lifetime). Start over from fresh
	// state: a new session, a new acquisition, a first page.
	RetryRestart
)

func (r Retry) String() string {
	switch r {
	case RetryBackoff:
		return "retry-backoff"
	case RetryRestart:
		return "retry-restart"
	default:
		return "retry-no"
	}
}

// The code table of openapi.yaml's ErrorCode, each with its retry advice.
var (
	// ErrInvalidRoute: a route is not `lease://{realm}/{area}/{resource}`, or
	// an exact operation was given a wildcard. Retry: no.
	ErrInvalidRoute = &Error{Code: "invalid_route"}
	// ErrInvalidSelector: a selector does not follow the grammar. Retry: no.
	ErrInvalidSelector = &Error{Code: "invalid_selector"}
	// ErrInvalidRequest: a malformed request (body, parameter, TTL out of
	// range). Retry: no.
	ErrInvalidRequest = &Error{Code: "invalid_request"}
	// ErrUnauthenticated: no token, or one the broker does not know. Retry:
	// no (fix the token).
	ErrUnauthenticated = &Error{Code: "unauthenticated"}
	// ErrForbidden: no single grant of the token covers the route or the
	// whole selector. Retry: no (ask for a grant).
	ErrForbidden = &Error{Code: "forbidden"}
	// ErrSessionNotFound: the session ended (DELETE, missed keepalives, or a
	// broker restart). Its leases are gone. Retry: restart with a new
	// session and acquire again.
	ErrSessionNotFound = &Error{Code: "session_not_found"}
	// ErrLeaseHeld: another session holds the lease and the acquisition did
	// not wait. Retry: backoff, or acquire with a wait.
	ErrLeaseHeld = &Error{Code: "lease_held"}
	// ErrAlreadyQueued: this session already waits for the lease in another
	// request. Retry: no (let the waiting request finish).
	ErrAlreadyQueued = &Error{Code: "already_queued"}
	// ErrWaitTimeout: the wait for the lease ended before a grant. Retry:
	// backoff (or wait again).
	ErrWaitTimeout = &Error{Code: "wait_timeout"}
	// ErrQueueFull: the lease already has the maximum of waiters. Retry:
	// backoff.
	ErrQueueFull = &Error{Code: "queue_full"}
	// ErrNotOwner: the lease is held by another session. The caller's lease
	// is lost. Retry: restart (acquire again; stop the work guarded by the
	// old token). A route held by no one answers extend with ErrLeaseExpired
	// and release with success.
	ErrNotOwner = &Error{Code: "not_owner"}
	// ErrFenced: the fencing token is not the current one for this route.
	// The caller's lease is lost. Retry: restart.
	ErrFenced = &Error{Code: "fenced"}
	// ErrLeaseExpired: the lease's TTL ran out before the extension (also
	// reported locally when a Lease's deadline passed). Retry: restart.
	ErrLeaseExpired = &Error{Code: "lease_expired"}
	// ErrInvalidCursor: a cursor from another selector or family, or a
	// forged one. Retry: no (list from the first page).
	ErrInvalidCursor = &Error{Code: "invalid_cursor"}
	// ErrCursorExpired: the snapshot behind the cursor was evicted. Retry:
	// restart from the first page.
	ErrCursorExpired = &Error{Code: "cursor_expired"}
	// ErrEpochChanged: the cursor belongs to an earlier broker lifetime.
	// Retry: restart from the first page (and resubscribe, reacquire).
	ErrEpochChanged = &Error{Code: "epoch_changed"}
	// ErrSubscriptionLimit: the session has 128 wildcard (1,024 in all)
	// registrations (Scope "session"), or the family its quota of streams or
	// registrations (Scope "family"), or the broker its cap (Scope
	// "broker"). Retry: no (unsubscribe or close streams first).
	ErrSubscriptionLimit = &Error{Code: "subscription_limit"}
	// ErrInventoryUnavailable: the inventory could not be read (never an
	// empty result in disguise). Retry: backoff.
	ErrInventoryUnavailable = &Error{Code: "inventory_unavailable"}
	// ErrInvalidName: an illegal fleet root, kind or spec name. Retry: no.
	ErrInvalidName = &Error{Code: "invalid_name"}
	// ErrSpecNotFound: the fleet has no spec of that name. Retry: no.
	ErrSpecNotFound = &Error{Code: "spec_not_found"}
	// ErrPayloadTooLarge: the body is larger than the operation allows.
	// Retry: no.
	ErrPayloadTooLarge = &Error{Code: "payload_too_large"}
	// ErrInternal: the broker failed. Retry: backoff.
	ErrInternal = &Error{Code: "internal"}
	// ErrNotFound: no such path (wrong base URL?). Retry: no.
	ErrNotFound = &Error{Code: "not_found"}
	// ErrMethodNotAllowed: wrong method for the path. Retry: no.
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed"}
	// ErrNotImplemented: the broker does not implement the operation (yet).
	// Retry: no.
	ErrNotImplemented = &Error{Code: "not_implemented"}
	// ErrUnavailable: the broker is shutting down or overloaded (also a
	// gateway's 502/503/504 without a problem body). Retry: backoff.
	ErrUnavailable = &Error{Code: "unavailable"}
	// ErrSessionLimit: the broker holds its maximum of live sessions (Scope
	// "broker"), or the caller's family its quota (Scope "family"). Retry:
	// backoff.
	ErrSessionLimit = &Error{Code: "session_limit"}
	// ErrSpecLimit: the fleet root holds its family's quota of specs (Scope
	// "root"). Retry: no (forget specs first).
	ErrSpecLimit = &Error{Code: "spec_limit"}
	// ErrWrongBroker: another broker of a multi-broker deployment serves the
	// caller's family (421; docs/placement.md); the problem names it. The
	// session, if any, ended with the move. Retry: restart (at the owner).
	ErrWrongBroker = &Error{Code: "wrong_broker"}
	// ErrFamilyUnavailable: no broker serves the caller's family right now
	// (a failover is in progress). Retry: backoff.
	ErrFamilyUnavailable = &Error{Code: "family_unavailable"}
)

// codeTable lists every known code with its sentinel and advice.
var codeTable = []struct {
	err    *Error
	advice Retry
}{
	{ErrInvalidRoute, RetryNo},
	{ErrInvalidSelector, RetryNo},
	{ErrInvalidRequest, RetryNo},
	{ErrUnauthenticated, RetryNo},
	{ErrForbidden, RetryNo},
	{ErrSessionNotFound, RetryRestart},
	{ErrLeaseHeld, RetryBackoff},
	{ErrAlreadyQueued, RetryNo},
	{ErrWaitTimeout, RetryBackoff},
	{ErrQueueFull, RetryBackoff},
	{ErrNotOwner, RetryRestart},
	{ErrFenced, RetryRestart},
	{ErrLeaseExpired, RetryRestart},
	{ErrInvalidCursor, RetryNo},
	{ErrCursorExpired, RetryRestart},
	{ErrEpochChanged, RetryRestart},
	{ErrSubscriptionLimit, RetryNo},
	{ErrInventoryUnavailable, RetryBackoff},
	{ErrInvalidName, RetryNo},
	{ErrSpecNotFound, RetryNo},
	{ErrPayloadTooLarge, RetryNo},
	{ErrInternal, RetryBackoff},
	{ErrNotFound, RetryNo},
	{ErrMethodNotAllowed, RetryNo},
	{ErrNotImplemented, RetryNo},
	{ErrUnavailable, RetryBackoff},
	{ErrSessionLimit, RetryBackoff},
	{ErrSpecLimit, RetryNo},
	{ErrWrongBroker, RetryRestart},
	{ErrFamilyUnavailable, RetryBackoff},
}

// Codes lists every code this SDK knows, in the contract's order.
func Codes() []Code {
	out := make([]Code, len(codeTable))
	for i, c := range codeTable {
		out[i] = c.err.Code
	}
	return out
}

// Advice says what to do after err. A broker *Error is advised by its code
// (an unknown code by its status: 5xx and 429 back off, anything else does
// not retry). ErrLeaseLost, ErrStreamEnded and the stream-end errors advise a
// restart; a context error advises no retry; any other error (a transport
// failure) advises backoff.
func Advice(err error) Retry {
	var e *Error
	switch {
	case err == nil:
		return RetryNo
	case errors.As(err, &e):
		for _, c := range codeTable {
			if c.err.Code == e.Code {
				return c.advice
			}
		}
		if e.Status >= 500 || e.Status == http.StatusTooManyRequests {
			return RetryBackoff
		}
		return RetryNo
	case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrSessionLost), errors.Is(err, ErrStreamEnded):
		return RetryRestart
	case errors.Is(err, ErrReleased), errors.Is(err, ErrClosed), isContextErr(err):
		return RetryNo
	default:
		return RetryBackoff
	}
}

// Errors of the SDK itself, never sent by the broker.
var (
	// ErrClosed: the Session, Subscription or Observer was closed by its
	// owner.
	ErrClosed = errors.New("muster: closed")
	// ErrLeaseLost wraps every reason a *Lease stopped being held other than
	// its own Release: errors.Is(lease.Err(), ErrLeaseLost), and the cause
	// (ErrNotOwner, ErrFenced, ErrLeaseExpired, ErrSessionNotFound, …) is
	// matched by errors.Is as well.
	ErrLeaseLost = errors.New("muster: lease lost")
	// ErrReleased is a Lease's Err after its own successful Release.
	ErrReleased = errors.New("muster: lease released")
	// ErrStreamEnded: a watch stream ended without a terminal event (the
	// connection dropped, or the broker went away).
	ErrStreamEnded = errors.New("muster: watch stream ended")
)
