package sse

import (
	"bytes"
	"strconv"
	"time"
)

// Event is one Server-Sent Event.
//
// Name is the event type ("change", "snapshot", "overflow", …); empty means
// the default type "message". ID is written as the id field when not empty.
// Data is the payload, usually one JSON document; it is written as one data
// line per line it contains (CR LF, CR and LF all end a line), and at least
// one data line is always written, so that even an event with empty Data is
// dispatched by a WHATWG EventSource.
//
// Name and ID must be single lines: bytes that would break the framing (CR
// and LF in both, NUL in ID) are written as spaces. An Event is passed by
// value; Data is not copied, so it must not be modified once the event has
// been offered. One Data slice may be shared by many streams.
//
// Payload, when not nil, supplies the data instead of Data, when the event
// is written: a producer that must not spend time (the broker's actor)
// offers a typed value, and the writer of each stream encodes it.
type Event struct {
	Name    string
	ID      string
	Data    []byte
	Payload Payload
}

// Payload is data encoded when the event is written, on the writer's
// goroutine, rather than when it is offered.
//
// AppendData appends the data to b and returns the extended buffer; it is
// framed like Data. It is called at most once per stream the event is
// written to, and never for an event that is dropped (a stream that dies
// first). A Payload offered to several streams is called by several
// writers at once, so it must be safe for concurrent use (encode once
// under a sync.Once, say, and share the bytes), and it must append the same
// bytes every time.
type Payload interface {
	AppendData(b []byte) []byte
}

// AppendEvent appends the wire form of ev to b and returns the extended
// buffer: the event, id and data fields, then the blank line that
// dispatches the event. It does not allocate when b has room (apart from
// what a Payload allocates).
func AppendEvent(b []byte, ev Event) []byte {
	if ev.Name != "" {
		b = append(b, "event: "...)
		b = appendLine(b, ev.Name, false)
		b = append(b, '\n')
	}
	if ev.ID != "" {
		b = append(b, "id: "...)
		b = appendLine(b, ev.ID, true)
		b = append(b, '\n')
	}
	if ev.Payload != nil {
		return appendPayload(b, ev.Payload)
	}
	return append(appendData(b, ev.Data), '\n')
}

// appendPayload appends the data fields of p and the blank line. The data
// is appended in place as one data line, and framed again in the rare case
// that it holds line breaks.
func appendPayload(b []byte, p Payload) []byte {
	start := len(b)
	b = append(b, "data: "...)
	b = p.AppendData(b)
	if indexEOL(b[start+len("data: "):]) >= 0 {
		data := bytes.Clone(b[start+len("data: "):])
		b = appendData(b[:start], data)
		return append(b, '\n')
	}
	return append(b, '\n', '\n')
}

// appendData appends data as data fields, one per line it contains.
func appendData(b, data []byte) []byte {
	for {
		i := indexEOL(data)
		if i < 0 {
			b = append(b, "data: "...)
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return b
}

// appendLine appends s with CR and LF (and NUL when nul is set) replaced by
// spaces, so that s stays one field value.
func appendLine(b []byte, s string, nul bool) []byte {
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		clean = s[i] != '\r' && s[i] != '\n' && (!nul || s[i] != 0)
	}
	if clean {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' || (nul && c == 0) {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// appendComment appends a comment line followed by a blank line; the blank
// line makes intermediaries that buffer by event pass the comment on.
func appendComment(b []byte, text string) []byte {
	b = append(b, ':', ' ')
	b = appendLine(b, text, false)
	return append(b, '\n', '\n')
}

// appendRetry appends the retry field (in whole milliseconds) as a block of
// its own. A block without data dispatches nothing.
func appendRetry(b []byte, d time.Duration) []byte {
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, d.Milliseconds(), 10)
	return append(b, '\n', '\n')
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}
