package muster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxEventSize bounds the bytes buffered for one event (a snapshot marker
// with a full first page is well below it).
const maxEventSize = 8 << 20

var errEventTooLarge = errors.New("muster: event-stream event too large")

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	Name string // the event type; "message" when the event had no event field
	ID   string // the stream's last event ID as of this event
	Data string // the data lines joined by LF
}

// sseReader reads an event stream by the WHATWG "event stream
// interpretation" rules: a leading byte-order mark is dropped; lines end with
// CR LF, LF or CR; a line starting with a colon is a comment; "field: value"
// loses one space after the colon, a line without a colon is a field with an
// empty value; data lines are joined with LF; a blank line dispatches the
// event unless it had no data field; unknown fields are ignored, so is retry
// (the observer has its own backoff); an id containing NUL is ignored; an
// event not ended by a blank line before the end of the stream is discarded.
//
// It reads through a bufio.Reader and never looks past the line it is
// reading, so an event is returned as soon as its blank line arrives.
type sseReader struct {
	r       *bufio.Reader
	max     int
	started bool // the first line (which may carry a BOM) was read
	skipLF  bool // the last line ended with CR: an LF right after it is part of that ending
	err     error

	line    []byte
	data    []byte
	hasData bool
	name    string
	lastID  string
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next event; io.EOF at a clean end of the stream (a
// partial event is discarded). After an error every call returns it again.
func (d *sseReader) next() (sseEvent, error) {
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
		if err := d.field(line); err != nil {
			d.err = err
		}
	}
	return sseEvent{}, d.err
}

func (d *sseReader) readLine() ([]byte, error) {
	d.line = d.line[:0]
	for {
		b, err := d.r.ReadByte()
		if err != nil {
			return nil, err
		}
		if d.skipLF {
			d.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return d.bom(), nil
		case '\r':
			d.skipLF = true
			return d.bom(), nil
		}
		if len(d.line) >= d.max {
			return nil, errEventTooLarge
		}
		d.line = append(d.line, b)
	}
}

// bom drops the byte-order mark of the stream's first line.
func (d *sseReader) bom() []byte {
	if !d.started {
		d.started = true
		return bytes.TrimPrefix(d.line, []byte("\xEF\xBB\xBF"))
	}
	return d.line
}

func (d *sseReader) field(line []byte) error {
	if line[0] == ':' {
		return nil
	}
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if len(d.data)+len(value)+1 > d.max {
			return errEventTooLarge
		}
		d.data = append(d.data, value...)
		d.data = append(d.data, '\n')
		d.hasData = true
	case "event":
		d.name = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.lastID = string(value)
		}
	}
	return nil
}

func (d *sseReader) dispatch() (sseEvent, bool) {
	defer func() { d.data, d.hasData, d.name = d.data[:0], false, "" }()
	if !d.hasData {
		return sseEvent{}, false
	}
	ev := sseEvent{Name: d.name, ID: d.lastID, Data: string(d.data[:len(d.data)-1])}
	if ev.Name == "" {
		ev.Name = "message"
	}
	return ev, true
}
