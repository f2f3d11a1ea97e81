package sse

import (
	"net/http"
	"time"
)

// control is what the writer needs of a ResponseWriter besides Write:
// flushing and write deadlines. It is found once per stream by following
// Unwrap the way http.ResponseController does on every call, so the writer
// does not walk the middleware's wrappers twice per write.
type control struct {
	flusher  interface{ FlushError() error }
	deadline interface{ SetWriteDeadline(time.Time) error }
}

// newControl finds, for each of flush and write deadlines, the first writer
// along w's Unwrap chain that has it, as http.ResponseController would.
// A nil field means the chain has no such writer.
func newControl(w http.ResponseWriter) control {
	var c control
	for rw := w; rw != nil && (c.flusher == nil || c.deadline == nil); {
		if c.flusher == nil {
			switch f := rw.(type) {
			case interface{ FlushError() error }:
				c.flusher = f
			case http.Flusher:
				c.flusher = plainFlusher{f}
			}
		}
		if d, ok := rw.(interface{ SetWriteDeadline(time.Time) error }); ok && c.deadline == nil {
			c.deadline = d
		}
		u, ok := rw.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		rw = u.Unwrap()
	}
	return c
}

// Flush flushes, or fails with http.ErrNotSupported.
func (c control) Flush() error {
	if c.flusher == nil {
		return http.ErrNotSupported
	}
	return c.flusher.FlushError()
}

// SetWriteDeadline sets the write deadline, or fails with
// http.ErrNotSupported.
func (c control) SetWriteDeadline(t time.Time) error {
	if c.deadline == nil {
		return http.ErrNotSupported
	}
	return c.deadline.SetWriteDeadline(t)
}

// plainFlusher is an http.Flusher that cannot report errors.
type plainFlusher struct{ http.Flusher }

func (f plainFlusher) FlushError() error { f.Flush(); return nil }
