package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero Options.
const (
	DefaultRetry        = 2 * time.Second
	DefaultHeartbeat    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// ErrServed is returned by Serve for a stream that is or was already served.
var ErrServed = errors.New("sse: stream already served")

// Options tune Serve. The zero value uses the defaults.
type Options struct {
	// Retry is sent as the retry field at the start of the stream, in whole
	// milliseconds: the reconnection delay a browser EventSource uses.
	// Zero means DefaultRetry; negative sends no retry field.
	Retry time.Duration

	// Heartbeat is how long the stream may be idle before a ": keepalive"
	// comment is written. Zero or negative means DefaultHeartbeat.
	Heartbeat time.Duration

	// WriteTimeout bounds each write to the client: every chunk of at most
	// 32 KiB (the last one together with its flush) must complete within
	// it (within 9/10 of it at least: a deadline set less than a tenth of
	// it ago is kept for the next write rather than set anew), so a slow
	// but moving client survives a large batch and a stalled one is cut
	// off. It is set with the ResponseWriter's SetWriteDeadline
	// (as http.ResponseController sets it), independently of
	// http.Server.WriteTimeout (which must not be used for streams). Zero or
	// negative means DefaultWriteTimeout.
	WriteTimeout time.Duration

	// Overflow is the terminal event written when the queue overflowed.
	// The zero value means event "overflow" with data {}.
	Overflow Event

	// OnOverflow, if set, is called once from the writer goroutine when it
	// finds the stream overflowed, before the overflow event is written.
	OnOverflow func()

	// Pool, if set, writes the stream after its first write on the pool's
	// few goroutines instead of Serve's own (see Pool); Serve waits for
	// the stream to end.
	Pool *Pool
}

func (o Options) withDefaults() Options {
	if o.Retry == 0 {
		o.Retry = DefaultRetry
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.Overflow.Name == "" && o.Overflow.Data == nil && o.Overflow.Payload == nil {
		o.Overflow = Event{Name: "overflow", Data: []byte("{}")}
	}
	return o
}

// Serve writes s to the client as text/event-stream until the stream ends,
// and is the one writer of s. Call it from the handler goroutine, once per
// stream; the producer (the broker's actor) never waits for it.
//
// It sets the Content-Type, Cache-Control: no-store and X-Accel-Buffering: no
// headers, writes the retry field together with whatever is already queued
// (the snapshot marker), and then loops: it writes each batch of queued
// events with one flush, and a ": keepalive" comment whenever the stream has
// been idle for Options.Heartbeat.
//
// Serve returns nil after it has written the terminal event (End or
// overflow). Otherwise it returns why it stopped: the request context's
// error when the client went away, or the write or flush error, which wraps
// os.ErrDeadlineExceeded when the client stalled for Options.WriteTimeout.
// When it returns, Done is closed and Offer refuses further events. If the
// ResponseWriter cannot set write deadlines (a wrapper without Unwrap),
// Serve fails before writing anything, so the handler can still answer with
// an error; one that cannot flush fails the first write.
func Serve(w http.ResponseWriter, r *http.Request, s *Stream, opt Options) error {
	if !s.claim() {
		return ErrServed
	}
	defer s.close()
	wr := writer{w: w, rc: newControl(w), opt: opt.withDefaults(), clearEach: r.ProtoMajor != 1}
	if err := wr.rc.SetWriteDeadline(time.Time{}); err != nil {
		return fmt.Errorf("sse: write deadlines: %w", err)
	}
	defer wr.disarm()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	// The first write always happens, so the client has the headers and
	// the retry field at once, together with the events queued so far.
	select {
	case <-s.wake:
	default:
	}
	ending, err := wr.writeBatch(s, true)
	if err != nil || ending {
		return err
	}

	// The writer sleeps on the stream's wake channel alone: the client
	// going away and the heartbeat timer wake it through the same channel,
	// so that a change costs one channel receive rather than a select over
	// three, and the heartbeat timer is not reset for every batch.
	ctx := r.Context()
	var gone, beat atomic.Bool
	stop := context.AfterFunc(ctx, func() { gone.Store(true); s.signal() })
	defer stop()
	hb := time.AfterFunc(wr.opt.Heartbeat, func() { beat.Store(true); s.signal() })
	defer hb.Stop()
	if p := wr.opt.Pool; p != nil {
		ps := &pooled{pool: p, s: s, wr: &wr, gone: &gone, beat: &beat, hb: hb, result: make(chan turnEnd, 1)}
		p.attach(ps)
		end := <-ps.result
		switch {
		case end.err != nil || end.terminal:
			return end.err
		default:
			return ctx.Err()
		}
	}
	for {
		<-s.wake
		if gone.Load() {
			return ctx.Err()
		}
		ending, err := wr.writeBatch(s, false)
		if err != nil || ending {
			return err
		}
		if beat.Load() {
			beat.Store(false)
			if err := wr.heartbeat(s, hb); err != nil {
				return err
			}
		}
	}
}

// heartbeat runs when the heartbeat timer has fired: if nothing was
// written for a whole interval it writes a keepalive comment and gives
// back the queue buffers; either way it sets the timer to fire when the
// stream will next have been idle for an interval.
func (wr *writer) heartbeat(s *Stream, hb *time.Timer) error {
	if idle := time.Since(wr.last); idle < wr.opt.Heartbeat {
		hb.Reset(wr.opt.Heartbeat - idle)
		return nil
	}
	wr.spare = nil
	s.trim()
	bp := getBuf()
	*bp = appendComment((*bp)[:0], "keepalive")
	err := wr.write(*bp, true)
	putBuf(bp)
	if err == nil {
		err = wr.disarm()
	}
	hb.Reset(wr.opt.Heartbeat)
	return err
}

// writer is the state of one Serve call.
type writer struct {
	w     http.ResponseWriter
	rc    control
	opt   Options
	spare []Event   // an empty queue buffer to hand back to the stream
	last  time.Time // when the last write started

	// clearEach: clear the write deadline after every flush (HTTP/2);
	// otherwise it stays set until the stream is idle for a heartbeat or
	// Serve returns, and armed says it is set, to deadline.
	clearEach, armed bool
	deadline         time.Time
}

// keepCap bounds the queue buffer a busy stream keeps between batches.
const keepCap = 256

// writeBatch writes what is queued in s (after the retry field if first),
// and the terminal event if the stream is ending, with one flush. It reports
// whether the terminal was written.
func (wr *writer) writeBatch(s *Stream, first bool) (ending bool, err error) {
	b := s.take(wr.spare)
	if len(b.events) == 0 && !b.ending && !first {
		wr.spare = b.events
		return false, nil
	}
	bp := getBuf()
	defer putBuf(bp)
	buf := (*bp)[:0]
	if first && wr.opt.Retry > 0 {
		buf = appendRetry(buf, wr.opt.Retry)
	}
	for _, ev := range b.events {
		buf = AppendEvent(buf, ev)
		if len(buf) >= chunkSize {
			// Write as we go, so that the buffer stays near one chunk
			// whatever the size of the batch.
			if err := wr.write(buf, false); err != nil {
				return false, err
			}
			buf = buf[:0]
		}
	}
	clear(b.events) // drop the Data references before the slice is reused
	wr.spare = nil
	if cap(b.events) <= keepCap {
		wr.spare = b.events[:0]
	}
	if b.ending {
		final := b.final
		if b.overflow {
			final = wr.opt.Overflow
			if wr.opt.OnOverflow != nil {
				wr.opt.OnOverflow()
			}
		}
		buf = AppendEvent(buf, final)
	}
	err = wr.write(buf, true)
	*bp = buf
	return b.ending && err == nil, err
}

// chunkSize is the most written under one write deadline.
const chunkSize = 32 << 10

// renewAt: a deadline set less than WriteTimeout/renewAt ago is not set
// again for the next write, so a busy stream sets it about once per tenth
// of WriteTimeout rather than once per write.
const renewAt = 10

// write writes p in chunks, each under a write deadline of at least 9/10 of
// WriteTimeout from its start (a deadline set less than a tenth of
// WriteTimeout ago is kept, see renewAt). With flush it then flushes under
// the last chunk's deadline.
//
// Over HTTP/2 it then clears the deadline: there a pending deadline resets
// the stream even when nothing is being written. Over HTTP/1 a deadline
// only bounds the writes on the connection, and the next write sets a
// fresh one anyway, so it is left set after the flush and cleared only
// when the stream goes idle (the keepalive) and when Serve returns: one
// deadline call per write instead of two.
func (wr *writer) write(p []byte, flush bool) error {
	for first := true; first || len(p) > 0; first = false {
		wr.last = time.Now()
		if !wr.armed || wr.deadline.Sub(wr.last) < wr.opt.WriteTimeout-wr.opt.WriteTimeout/renewAt {
			wr.deadline = wr.last.Add(wr.opt.WriteTimeout)
			if err := wr.rc.SetWriteDeadline(wr.deadline); err != nil {
				return err
			}
			wr.armed = true
		}
		n := min(len(p), chunkSize)
		if _, err := wr.w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	if !flush {
		return nil
	}
	if err := wr.rc.Flush(); err != nil {
		return err
	}
	if wr.clearEach {
		return wr.disarm()
	}
	return nil
}

// disarm clears the write deadline if one is set.
func (wr *writer) disarm() error {
	if !wr.armed {
		return nil
	}
	wr.armed = false
	return wr.rc.SetWriteDeadline(time.Time{})
}

// bufPool holds wire buffers, so that an idle stream holds none.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(bp *[]byte) {
	if cap(*bp) > 256<<10 {
		return // let a buffer grown by a huge event go
	}
	bufPool.Put(bp)
}
