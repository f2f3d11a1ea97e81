// Package muster is the broker's shared vocabulary: the error codes of the
// contract, the one error type that carries them, and the limits and name
// rules that more than one layer enforces. It imports nothing of this module
// and nothing outside the standard library, so every layer (core, fleetstore,
// handlers, cmd) may depend on it and it depends on none of them.
//
// What a code means over HTTP (its status) is the HTTP layer's business:
// handlers holds that table.
package muster

import (
	"errors"
	"fmt"
)

// Code is a stable, append-only error identifier shared by the broker, the
// HTTP contract (the `code` member of every problem body) and the SDKs.
// Never rename a code; add new ones at the end.
type Code string

// The codes, in the contract's order (openapi.yaml ErrorCode
// x-extensible-enum).
const (
	CodeInvalidRoute         Code = "invalid_route"
	CodeInvalidSelector      Code = "invalid_selector"
	CodeInvalidRequest       Code = "invalid_request"
	CodeUnauthenticated      Code = "unauthenticated"
	CodeForbidden            Code = "forbidden"
	CodeSessionNotFound      Code = "session_not_found"
	CodeLeaseHeld            Code = "lease_held"
	CodeAlreadyQueued        Code = "already_queued"
	CodeWaitTimeout          Code = "wait_timeout"
	CodeQueueFull            Code = "queue_full"
	CodeNotOwner             Code = "not_owner"
	CodeFenced               Code = "fenced"
	CodeLeaseExpired         Code = "lease_expired"
	CodeInvalidCursor        Code = "invalid_cursor"
	CodeCursorExpired        Code = "cursor_expired"
	CodeEpochChanged         Code = "epoch_changed"
	CodeSubscriptionLimit    Code = "subscription_limit"
	CodeInventoryUnavailable Code = "inventory_unavailable"
	CodeInvalidName          Code = "invalid_name"
	CodeSpecNotFound         Code = "spec_not_found"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeInternal             Code = "internal"
	CodeNotFound             Code = "not_found"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeNotImplemented       Code = "not_implemented"
	CodeUnavailable          Code = "unavailable"
	CodeSessionLimit         Code = "session_limit"
	CodeSpecLimit            Code = "spec_limit"
)

// Codes lists every code in the contract's order.
func Codes() []Code {
	return []Code{
		CodeInvalidRoute, CodeInvalidSelector, CodeInvalidRequest, CodeUnauthenticated,
		CodeForbidden, CodeSessionNotFound, CodeLeaseHeld, CodeAlreadyQueued,
		CodeWaitTimeout, CodeQueueFull, CodeNotOwner, CodeFenced, CodeLeaseExpired,
		CodeInvalidCursor, CodeCursorExpired, CodeEpochChanged, CodeSubscriptionLimit,
		CodeInventoryUnavailable, CodeInvalidName, CodeSpecNotFound, CodePayloadTooLarge,
		CodeInternal, CodeNotFound, CodeMethodNotAllowed, CodeNotImplemented,
		CodeUnavailable, CodeSessionLimit, CodeSpecLimit,
	}
}

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

// Error is the one error type of the domain: a code and a message safe to
// show to the caller. The message never contains a session id, a token or a
// submitted value.
type Error struct {
	Code    Code
	Message string
	// Scope, for a limit (429), names the bound that was hit: a
	// broker-wide cap or the caller's family's quota, a session's or a
	// route's bound. Empty for other errors.
	Scope Scope
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// LimitErrorf builds a limit *Error with its scope.
func LimitErrorf(code Code, scope Scope, format string, args ...any) *Error {
	e := Errorf(code, format, args...)
	e.Scope = scope
	return e
}

// ErrorCode extracts the code of err: the code of an *Error in its chain, or
// CodeInternal for anything else (nil included).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
