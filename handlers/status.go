package handlers

import (
	"net/http"
	"strconv"

	"github.com/musterhq/muster"
)

// statuses is the HTTP status each code is answered with: the one
// code → status table of the server. Every code of the contract has a row
// (TestStatusTableIsTheContracts); the SDKs read the status from the
// answer, never from a table of their own.
var statuses = map[muster.Code]int{
	muster.CodeInvalidRoute:         400,
	muster.CodeInvalidSelector:      400,
	muster.CodeInvalidRequest:       400,
	muster.CodeUnauthenticated:      401,
	muster.CodeForbidden:            403,
	muster.CodeSessionNotFound:      404,
	muster.CodeLeaseHeld:            409,
	muster.CodeAlreadyQueued:        409,
	muster.CodeWaitTimeout:          409,
	muster.CodeQueueFull:            429,
	muster.CodeNotOwner:             409,
	muster.CodeFenced:               409,
	muster.CodeLeaseExpired:         409,
	muster.CodeInvalidCursor:        400,
	muster.CodeCursorExpired:        410,
	muster.CodeEpochChanged:         410,
	muster.CodeSubscriptionLimit:    429,
	muster.CodeInventoryUnavailable: 503,
	muster.CodeInvalidName:          400,
	muster.CodeSpecNotFound:         404,
	muster.CodePayloadTooLarge:      413,
	muster.CodeInternal:             500,
	muster.CodeNotFound:             404,
	muster.CodeMethodNotAllowed:     405,
	muster.CodeNotImplemented:       501,
	muster.CodeUnavailable:          503,
	muster.CodeSessionLimit:         429,
	muster.CodeSpecLimit:            429,
	muster.CodeWrongBroker:          421,
	muster.CodeFamilyUnavailable:    503,
}

// httpStatus is the status code is answered with; a code without a row is
// 500.
func httpStatus(code muster.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return 500
}

// retryAfter is the Retry-After, in seconds, of each code answered 429 or
// 503: every such answer says when to try again
// (TestRetryAfterOnEvery429And503; docs/operations.md lists the values). A limit that frees itself as leases,
// waiters and sessions come and go is worth a retry soon; one that only the
// caller's own clean-up frees (specs of a root) later.
var retryAfter = map[muster.Code]int{
	muster.CodeQueueFull:            1,
	muster.CodeSubscriptionLimit:    5,
	muster.CodeSessionLimit:         5,
	muster.CodeSpecLimit:            60,
	muster.CodeInventoryUnavailable: 1,
	muster.CodeUnavailable:          1,
	muster.CodeFamilyUnavailable:    1,
}

// setRetryAfter sets the Retry-After of code's answer, when it has one.
func setRetryAfter(h http.Header, code muster.Code) {
	if s, ok := retryAfter[code]; ok {
		h["Retry-After"] = []string{strconv.Itoa(s)}
	}
}
