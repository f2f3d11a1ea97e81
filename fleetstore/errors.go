package fleetstore

import (
	"context"
	"errors"

	"github.com/musterhq/muster"
)

// BackendError is a failure of the storage backend rather than of the request.
// Public carries what a caller may be shown: CodeUnavailable when the backend
// could not be reached or the call was cut short (retrying later may work),
// CodeInternal otherwise, with a fixed message naming the operation. Cause is
// the backend's own error, for logs only: it may quote stored values.
//
// errors.As(err, new(*muster.Error)) finds Public, so muster.ErrorCode works on
// it; errors.Is sees through to Cause (context.Canceled, for one).
type BackendError struct {
	Public *muster.Error
	Cause  error
}

func (e *BackendError) Error() string { return e.Public.Error() + ": " + e.Cause.Error() }

// Unwrap exposes both the public error and the cause.
func (e *BackendError) Unwrap() []error { return []error{e.Public, e.Cause} }

// backendErr wraps cause as a BackendError for operation op. unavailable
// reports whether the backend classed the failure as transient; a cancelled
// or expired context is always unavailable. An error that already carries a
// *muster.Error passes through unchanged.
func backendErr(op string, cause error, unavailable bool) error {
	if cause == nil {
		return nil
	}
	var ce *muster.Error
	if errors.As(cause, &ce) {
		return cause
	}
	code, msg := muster.CodeInternal, "fleet store failed to "+op
	if unavailable || errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
		code, msg = muster.CodeUnavailable, "fleet store unavailable to "+op
	}
	return &BackendError{Public: &muster.Error{Code: code, Message: msg}, Cause: cause}
}

// ErrSpecChanged is the cause of the BackendError (CodeInternal) of a
// Store.Drop, and of the sweep that called it, when a spec the sweep judged
// is stored under its name with other bytes: the read that handed the sweep
// those bytes was wrong (names are never reused and specs never change), so
// the sweep deletes nothing on that page and stops.
var ErrSpecChanged = errors.New("a spec judged by the sweep is stored with other bytes")

// errSpecNotFound is the answer of Get for a legal name that is not stored.
func errSpecNotFound() error {
	return muster.Errorf(muster.CodeSpecNotFound, "no spec with that name under this root")
}
