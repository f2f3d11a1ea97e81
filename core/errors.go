package core

import (
	"errors"
	"fmt"
)

// Code is a stable, append-only error identifier shared by the broker, the
// HTTP contract (the `code` member of every problem body) and the SDKs.
// Never rename a code; add new ones at the end.
type Code string

// The code table. HTTPStatus gives the status each code is answered with.
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
	// CodeWrongBroker: another broker serves the family (placement); the
	// edge names it, or answers CodeFamilyUnavailable when none does.
	CodeWrongBroker       Code = "wrong_broker"
	CodeFamilyUnavailable Code = "family_unavailable"
)

var statuses = map[Code]int{
	CodeInvalidRoute:         400,
	CodeInvalidSelector:      400,
	CodeInvalidRequest:       400,
	CodeUnauthenticated:      401,
	CodeForbidden:            403,
	CodeSessionNotFound:      404,
	CodeLeaseHeld:            409,
	CodeAlreadyQueued:        409,
	CodeWaitTimeout:          409,
	CodeQueueFull:            429,
	CodeNotOwner:             409,
	CodeFenced:               409,
	CodeLeaseExpired:         409,
	CodeInvalidCursor:        400,
	CodeCursorExpired:        410,
	CodeEpochChanged:         410,
	CodeSubscriptionLimit:    429,
	CodeInventoryUnavailable: 503,
	CodeInvalidName:          400,
	CodeSpecNotFound:         404,
	CodePayloadTooLarge:      413,
	CodeInternal:             500,
	CodeNotFound:             404,
	CodeMethodNotAllowed:     405,
	CodeNotImplemented:       501,
	CodeUnavailable:          503,
	CodeSessionLimit:         429,
	CodeSpecLimit:            429,
	CodeWrongBroker:          421,
	CodeFamilyUnavailable:    503,
}

// Codes lists every code in table order.
func Codes() []Code {
	return []Code{
		CodeInvalidRoute, CodeInvalidSelector, CodeInvalidRequest, CodeUnauthenticated,
		CodeForbidden, CodeSessionNotFound, CodeLeaseHeld, CodeAlreadyQueued,
		CodeWaitTimeout, CodeQueueFull, CodeNotOwner, CodeFenced, CodeLeaseExpired,
		CodeInvalidCursor, CodeCursorExpired, CodeEpochChanged, CodeSubscriptionLimit,
		CodeInventoryUnavailable, CodeInvalidName, CodeSpecNotFound, CodePayloadTooLarge,
		CodeInternal, CodeNotFound, CodeMethodNotAllowed, CodeNotImplemented,
		CodeUnavailable, CodeSessionLimit, CodeSpecLimit, CodeWrongBroker,
		CodeFamilyUnavailable,
	}
}

// HTTPStatus is the status a code is answered with; unknown codes are 500.
func (c Code) HTTPStatus() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return 500
}

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

// ErrorCode extracts the code of err: the code of an *Error in its chain, or
// CodeInternal for anything else.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
