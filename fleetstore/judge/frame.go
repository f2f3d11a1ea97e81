package judge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The wire between the broker and its worker: the broker writes frames (a
// 4-byte big-endian length, then the bytes): the schema first, then one
// spec per frame; closing its end ends the worker. The worker answers the
// schema, then each spec, with one status byte; statusRefused is followed
// by a frame holding the error's code, a newline and its message, and the
// worker exits after it.
const (
	statusOK      byte = 'K' // the schema compiled
	statusValid   byte = 'V' // the spec satisfies the schema
	statusInvalid byte = 'I' // it does not, or it is not one JSON value
	statusRefused byte = 'E' // the schema, or this spec, ran out of a budget
)

// maxFrame bounds what either side reads in one frame.
const maxFrame = 1 << 20

func writeFrame(w io.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame into buf's storage; io.EOF when the other side
// closed before a frame began.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("judge: frame of %d bytes is beyond %d", size, maxFrame)
	}
	buf = append(buf[:0], make([]byte, size)...)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
