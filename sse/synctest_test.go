package sse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeWriter is a ResponseWriter with flush and write deadlines for tests in
// a synctest bubble, where time is fake. It logs each flushed write with the
// time it happened and checks that every write runs under a deadline.
type fakeWriter struct {
	start time.Time
	delay time.Duration // each Write takes this long; past the deadline it fails

	mu       sync.Mutex
	writes   int
	header   http.Header
	pending  bytes.Buffer
	log      []string // "15s : keepalive\n\n" per flush
	deadline time.Time
	sets     int           // deadlines set (not cleared)
	minLeft  time.Duration // the least time a write had left before its deadline
	problems []string
}

func newFakeWriter() *fakeWriter {
	return &fakeWriter{start: time.Now(), header: make(http.Header)}
}

func (f *fakeWriter) Header() http.Header { return f.header }
func (f *fakeWriter) WriteHeader(int)     {}

func (f *fakeWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	deadline := f.deadline
	f.mu.Unlock()
	if deadline.IsZero() {
		f.problem("write without a deadline")
	}
	f.mu.Lock()
	if left := time.Until(deadline); f.minLeft == 0 || left < f.minLeft {
		f.minLeft = left
	}
	f.mu.Unlock()
	if f.delay > 0 {
		if time.Now().Add(f.delay).After(deadline) {
			time.Sleep(time.Until(deadline))
			return 0, fmt.Errorf("fake write: %w", os.ErrDeadlineExceeded)
		}
		time.Sleep(f.delay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	return f.pending.Write(p)
}

func (f *fakeWriter) FlushError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deadline.IsZero() {
		f.problems = append(f.problems, "flush without a deadline")
	}
	f.log = append(f.log, fmt.Sprintf("%v %s", time.Since(f.start), f.pending.String()))
	f.pending.Reset()
	return nil
}

func (f *fakeWriter) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	if !t.IsZero() {
		f.sets++
	}
	return nil
}

func (f *fakeWriter) problem(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, p)
}

func (f *fakeWriter) check(t *testing.T, want []string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := strings.Join(f.log, "|"); got != strings.Join(want, "|") {
		t.Errorf("writes:\n got %q\nwant %q", f.log, want)
	}
	if len(f.problems) > 0 {
		t.Errorf("problems: %q", f.problems)
	}
	if !f.deadline.IsZero() {
		t.Error("write deadline left set while idle")
	}
}

// serveFake runs Serve on a fakeWriter in the bubble and returns the
// request's cancel function and Serve's result channel.
func serveFake(s *Stream, fw *fakeWriter, opt Options) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/leases/watch", nil)
	errc := make(chan error, 1)
	go func() { errc <- Serve(fw, r, s, withPool(opt)) }()
	return cancel, errc
}

// TestHeartbeatTiming checks the default heartbeat on fake time: a
// keepalive after every 15 s of silence, counted from the last write.
func TestHeartbeatTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStream(8)
		s.Offer(Event{Name: "snapshot", Data: []byte("{}")})
		fw := newFakeWriter()
		cancel, errc := serveFake(s, fw, Options{})

		time.Sleep(40 * time.Second)
		s.Offer(Event{Name: "change", ID: "1", Data: []byte("{}")})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		fw.check(t, []string{
			"0s retry: 2000\n\nevent: snapshot\ndata: {}\n\n",
			"15s : keepalive\n\n",
			"30s : keepalive\n\n",
			"40s event: change\nid: 1\ndata: {}\n\n",
			"55s : keepalive\n\n",
		})
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v, want context.Canceled", err)
		}
	})
}

// TestWriteTimeoutFake: a write that cannot finish fails at exactly the
// write timeout.
func TestWriteTimeoutFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStream(8)
		fw := newFakeWriter()
		fw.delay = time.Hour
		start := time.Now()
		_, errc := serveFake(s, fw, Options{WriteTimeout: 3 * time.Second})
		err := <-errc
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Serve = %v, want os.ErrDeadlineExceeded", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("Serve returned after %v, want the 3s write timeout", d)
		}
	})
}

// TestDeadlineRenewedByTenths: over HTTP/1 a busy stream's write deadline
// is set again only once a tenth of the write timeout has passed since it
// was set, so every write still has at least 9/10 of the timeout.
func TestDeadlineRenewedByTenths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStream(8)
		s.Offer(Event{Name: "snapshot", Data: []byte("{}")})
		fw := newFakeWriter()
		cancel, errc := serveFake(s, fw, Options{WriteTimeout: time.Second})
		sets := func() int {
			synctest.Wait()
			fw.mu.Lock()
			defer fw.mu.Unlock()
			return fw.sets
		}
		for i := range 9 { // at 10, 20, …, 90 ms
			time.Sleep(10 * time.Millisecond)
			s.Offer(ev("change", fmt.Sprint(i)))
		}
		if n := sets(); n != 1 {
			t.Errorf("%d deadlines set by 90 ms, want 1 (at the first write)", n)
		}
		time.Sleep(20 * time.Millisecond) // 110 ms: a tenth has passed
		s.Offer(ev("change", "renewed"))
		if n := sets(); n != 2 {
			t.Errorf("%d deadlines set by 110 ms, want 2", n)
		}
		fw.mu.Lock()
		if fw.minLeft < 900*time.Millisecond {
			t.Errorf("a write had %v left before its deadline, want at least 900ms", fw.minLeft)
		}
		fw.mu.Unlock()
		cancel()
		<-errc
	})
}

// TestWriteTimeoutPerChunk: a slow client that keeps taking data survives a
// batch that takes longer than the write timeout in total, because each
// chunk gets its own deadline.
func TestWriteTimeoutPerChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStream(8)
		big := Event{Name: "snapshot", Data: bytes.Repeat([]byte("x"), 4*chunkSize)}
		s.Offer(big)
		s.End(Event{Name: "shutdown", Data: []byte("{}")})
		fw := newFakeWriter()
		fw.delay = 2 * time.Second // per write
		start := time.Now()
		_, errc := serveFake(s, fw, Options{WriteTimeout: 3 * time.Second})
		if err := <-errc; err != nil {
			t.Fatalf("Serve = %v", err)
		}
		fw.mu.Lock()
		defer fw.mu.Unlock()
		if d := time.Since(start); fw.writes < 5 || d != time.Duration(fw.writes)*fw.delay {
			t.Errorf("took %v in %d writes; want at least 5 writes of 2s each", d, fw.writes)
		}
		if n := len(fw.log); n != 1 || !strings.HasSuffix(fw.log[0], "event: shutdown\ndata: {}\n\n") {
			t.Errorf("%d flushes; want one ending with the terminal", n)
		}
	})
}

// TestIdleTrim: after one idle heartbeat the stream gives its queue buffer
// back.
func TestIdleTrim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStream(64)
		fw := newFakeWriter()
		cancel, errc := serveFake(s, fw, Options{Heartbeat: time.Second})
		for burst := range 2 { // the second burst gets the first one's buffer
			for i := range 40 {
				s.Offer(ev("change", fmt.Sprint(burst, i)))
			}
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		s.mu.Lock()
		busy := cap(s.queue)
		s.mu.Unlock()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		s.mu.Lock()
		idle := cap(s.queue)
		s.mu.Unlock()
		if busy == 0 || idle != 0 {
			t.Errorf("queue capacity %d after a burst, %d after a heartbeat; want >0, then 0", busy, idle)
		}
		cancel()
		<-errc
	})
}
