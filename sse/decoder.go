package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// DefaultMaxEventSize bounds the bytes a Decoder buffers for one event.
const DefaultMaxEventSize = 16 << 20

// ErrEventTooLarge is returned by Decoder.Next for an event (or a line)
// longer than the decoder's MaxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// Decoder reads Server-Sent Events from a stream following the WHATWG
// "event stream interpretation" rules: lines end with CR LF, LF or CR; a
// leading byte-order mark is dropped; a line starting with a colon is a
// comment; a line without a colon is a field name with an empty value; one
// space after the colon is removed; data lines are joined with LF; a blank
// line dispatches the event unless no data line was seen; unknown fields are
// ignored; an id containing NUL is ignored; retry takes ASCII digits only;
// an event not terminated by a blank line before the end is discarded.
//
// Bytes are passed through as they are, without UTF-8 validation.
type Decoder struct {
	// OnComment, if set, is called with each comment line, without the
	// leading colon (so ": keepalive" gives " keepalive"). The slice is
	// valid only during the call.
	OnComment func(text []byte)

	// MaxEventSize bounds the bytes buffered for one event; zero means
	// DefaultMaxEventSize.
	MaxEventSize int

	r       *bufio.Reader
	line    []byte // a line longer than what the reader buffers
	started bool   // the first line (which may carry a BOM) was read
	skipLF  bool   // the last line ended with CR: skip an LF right after it
	err     error  // sticky

	// The buffers of the event being read.
	data    []byte
	hasData bool   // a data field was seen (data may still be empty)
	name    string // its event field
	id      string // its id field
	pending bool   // a field was seen since the last blank line

	idBuf    string // the spec's last event ID buffer: never reset by a dispatch
	lastID   string // the spec's last event ID string: idBuf as of the last blank line
	retry    time.Duration
	retrySet bool
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReader(r)}
}

// Next returns the next dispatched event. Event.Name is the event field of
// that event ("" stands for the default type "message"), Event.ID its id
// field ("" if it had none; see LastEventID for the spec's persistent
// value), Event.Data its data lines joined by LF. At the end of the input
// Next returns io.EOF, or io.ErrUnexpectedEOF if an event or a line was cut
// off. After an error every call returns the same error.
func (d *Decoder) Next() (Event, error) {
	for d.err == nil {
		line, err := d.readLine()
		if err != nil {
			d.err = err
			break
		}
		if len(line) == 0 {
			if ev, ok := d.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		d.field(line)
		if len(d.data) > d.maxEventSize() {
			d.err = ErrEventTooLarge
		}
	}
	return Event{}, d.err
}

// LastEventID returns the last event ID string as the spec defines it: the
// value of the most recent id field (an empty one resets it) as of the last
// dispatch.
func (d *Decoder) LastEventID() string { return d.lastID }

// Retry returns the reconnection time set by the last valid retry field and
// whether there was one.
func (d *Decoder) Retry() (time.Duration, bool) { return d.retry, d.retrySet }

func (d *Decoder) maxEventSize() int {
	if d.MaxEventSize > 0 {
		return d.MaxEventSize
	}
	return DefaultMaxEventSize
}

// dispatch ends the current event at a blank line; ok is false when the
// event had no data field, which the spec does not dispatch.
func (d *Decoder) dispatch() (ev Event, ok bool) {
	d.lastID = d.idBuf
	if ok = d.hasData; ok {
		data := d.data
		if n := len(data); n > 0 && data[n-1] == '\n' {
			data = data[:n-1]
		}
		ev = Event{Name: d.name, ID: d.id, Data: append([]byte{}, data...)}
	}
	d.data, d.hasData, d.name, d.id, d.pending = d.data[:0], false, "", "", false
	return ev, ok
}

// field processes one non-blank line.
func (d *Decoder) field(line []byte) {
	if line[0] == ':' {
		if d.OnComment != nil {
			d.OnComment(line[1:])
		}
		return
	}
	d.pending = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "event":
		d.name = string(value)
	case "data":
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
		d.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.id = string(value)
			d.idBuf = d.id
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			d.retry, d.retrySet = time.Duration(ms)*time.Millisecond, true
		}
	}
}

// parseDigits parses a non-empty run of ASCII digits; absurdly large values
// are clamped rather than rejected.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	const maxMS = int64(1<<63-1) / int64(time.Millisecond)
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n > maxMS {
		n = maxMS
	}
	return n, true
}

// readLine returns the next line without its terminator. The slice is valid
// until the next call.
func (d *Decoder) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		if _, err := d.r.Peek(1); err != nil {
			if err == io.EOF {
				if len(d.line) > 0 || d.pending {
					return nil, io.ErrUnexpectedEOF
				}
			}
			return nil, err
		}
		buf, _ := d.r.Peek(d.r.Buffered())
		if d.skipLF {
			d.skipLF = false
			if buf[0] == '\n' {
				d.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if len(d.line)+len(buf) > d.maxEventSize() {
				return nil, ErrEventTooLarge
			}
			d.line = append(d.line, buf...)
			d.r.Discard(len(buf))
			continue
		}
		d.skipLF = buf[i] == '\r'
		var line []byte
		if len(d.line) == 0 {
			line = buf[:i] // valid until the next read; Discard does not read
		} else {
			d.line = append(d.line, buf[:i]...)
			line = d.line
		}
		d.r.Discard(i + 1)
		if !d.started {
			d.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		return line, nil
	}
}
