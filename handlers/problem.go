package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/musterhq/muster"
)

// problem is an RFC 9457 problem body with Muster's stable code.
type problem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail,omitempty"`
	Code   muster.Code `json:"code"`
	// Scope, on a 429, names the bound: "broker", "family", "session",
	// "route" or "root".
	Scope muster.Scope `json:"scope,omitempty"`
}

// writeProblem answers code with detail. The detail never contains a
// submitted value, a session id or schema internals.
func writeProblem(w http.ResponseWriter, code muster.Code, detail string) {
	writeScopedProblem(w, code, "", detail)
}

// writeScopedProblem is writeProblem with the scope of a limit. Every
// problem answer is written here or by writeMisdirected, and both set the
// code's Retry-After (every 429 and 503 has one).
func writeScopedProblem(w http.ResponseWriter, code muster.Code, scope muster.Scope, detail string) {
	status := httpStatus(code)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	setRetryAfter(h, code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Code:   code,
		Scope:  scope,
	})
}

// writeError answers err: a *muster.Error with its own code and message,
// anything else as `internal` (logged, never shown).
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	var e *muster.Error
	if errors.As(err, &e) {
		writeScopedProblem(w, e.Code, e.Scope, e.Message)
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The client left; nobody reads this answer.
		writeProblem(w, muster.CodeUnavailable, "the request was cancelled")
		return
	}
	log.Error("internal error", "method", r.Method, "route", routePattern(r), "err", err)
	writeProblem(w, muster.CodeInternal, "internal error")
}
