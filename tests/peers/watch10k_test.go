package peers

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// The sustained fan-out row: many watchers, a steady rate of changes.
const (
	// histStep is the resolution of the delivery latency histogram, and
	// histMax its range; later deliveries count in the last bucket.
	histStep = 100 * time.Microsecond
	histMax  = 60 * time.Second
)

// sustainedWatchers is the number of watchers of the sustained row (env
// MUSTER_PEERS_10K_WATCHERS, default 10,000).
func sustainedWatchers() int {
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PEERS_10K_WATCHERS")); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// sustainedRate is the rate of changes of the sustained row, acquires and
// releases alike (env MUSTER_PEERS_10K_RATE, default 100 a second).
func sustainedRate() int {
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PEERS_10K_RATE")); err == nil && n > 0 {
		return n
	}
	return 100
}

// sustainedFor is how long the changes go on (env MUSTER_PEERS_10K_TIME,
// default 10s).
func sustainedFor() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MUSTER_PEERS_10K_TIME")); err == nil && d > 0 {
		return d
	}
	return 10 * time.Second
}

// sustainedConfig lets one client address hold 10,000 streams of one
// family (the defaults give a family a quarter of the broker's 10,000
// streams, and an address a quarter of its 10,000 connections).
const sustainedConfig = tokenConfig + `limits:
  connections: 10500
  connections_per_address: 10500
  broker:
    watch_streams: 10100
  family:
    watch_streams: 10100
`

// BenchmarkWatch10k: 10,000 SSE watchers of lease://peers/w10k/** on their
// own connections (MUSTER_PEERS_10K_WATCHERS), and 100 changes a second
// (MUSTER_PEERS_10K_RATE) for 10 s (MUSTER_PEERS_10K_TIME): lease j is
// acquired by change 2j-1 and released by change 2j, change k due at
// start + (k-1)/rate, open loop (see measure). Each op is one such window.
// It reports the latency of every delivery, from the time its change was
// due to the watcher's read of its data line (p50, p99, max), the share of
// the deliveries that arrived, the changes answered per second, the
// broker's CPU time over the window (from /proc/PID/stat: user and system,
// all threads) per second and per change, the driver's own, and how many
// streams overflowed (they end; their later changes are missing).
//
// The broker is its own process (muster-10k, with sustainedConfig), the
// watchers are raw connections read line by line (no JSON decoding), so
// the driver spends little of the two cores; it needs two file descriptors
// per watcher on the machine, one in each process (Go raises the soft
// limit to the hard one).
func BenchmarkWatch10k(b *testing.B) {
	n := sustainedWatchers()
	var f *sustained
	defer func() {
		if f != nil {
			f.close()
		}
	}()
	for r := 1; r <= rounds(); r++ {
		b.Run(fmt.Sprintf("round%d/muster-sse", r), func(b *testing.B) {
			if f == nil {
				f = openSustained(b, n)
			}
			for b.Loop() {
				f.measure(b, sustainedFor())
			}
		})
	}
}

// sustained is the set of watchers of the sustained row.
type sustained struct {
	pid   int
	base  string // the broker's URL
	h     *httpLeaser
	conns []net.Conn

	// The window being measured (0: none) and when it started: change
	// 2j-1 acquires lease://peers/w10k/<window>-<j> and change 2j releases
	// it; change k is due at start + (k-1)×interval.
	window, start atomic.Int64
	interval      time.Duration
	hist          []atomic.Int64 // delivery latencies of the window
	got           atomic.Int64   // deliveries counted in hist
	overflows     atomic.Int64
	ended         atomic.Int64 // streams that ended for any reason
}

// openSustained starts the broker and opens n watchers, 16 at a time.
func openSustained(tb testing.TB, n int) *sustained {
	tb.Helper()
	base := once(tb, "muster-10k", func(tb testing.TB) string {
		return startMuster(tb, "muster-10k", buildMuster(tb), sustainedConfig)
	})
	addr := strings.TrimPrefix(base, "http://")
	f := &sustained{pid: pidOf("muster-10k"), base: base, interval: time.Second / time.Duration(sustainedRate()),
		hist: make([]atomic.Int64, histMax/histStep+1), conns: make([]net.Conn, n)}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				conn, err := f.openOne(addr)
				if err != nil {
					errs <- err
					return
				}
				f.conns[i] = conn
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		f.close()
		tb.Fatalf("open %d watchers: %v", n, err)
	}
	f.h = openHTTP(tb, base)
	return f
}

// openOne opens one watcher: a raw connection whose stream is registered
// (its snapshot read) and read from then on by a goroutine of its own.
func (f *sustained) openOne(addr string) (net.Conn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(conn, "GET /v1/leases/watch?selector=lease://peers/w10k/** HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer load-token\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("open stream: %v %v", err, resp)
	}
	lines := bufio.NewReaderSize(resp.Body, 4<<10)
	for {
		line, err := lines.ReadSlice('\n')
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("before the snapshot: %v", err)
		}
		if string(line) == "event: snapshot\n" {
			break
		}
	}
	go f.read(lines)
	return conn, nil
}

// read counts the deliveries of one watcher by the data lines of its
// change events (the route and kind say which change it is) until the
// stream ends.
func (f *sustained) read(lines *bufio.Reader) {
	defer f.ended.Add(1)
	for {
		line, err := lines.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			continue // a long data line: not ours to read
		case err != nil:
			return
		case bytes.HasPrefix(line, []byte("data: ")):
			if k := f.change(line); k > 0 {
				due := time.Unix(0, f.start.Load()).Add(time.Duration(k-1) * f.interval)
				i := min(int(time.Since(due)/histStep), len(f.hist)-1)
				f.hist[max(i, 0)].Add(1)
				f.got.Add(1)
			}
		case string(line) == "event: overflow\n":
			f.overflows.Add(1)
		}
	}
}

// routePrefix starts the route of every change of the sustained row.
var routePrefix = []byte(`"route":"lease://peers/w10k/`)

// change is the number of the change of this window that a change event's
// data line is, or 0 when it is none.
func (f *sustained) change(line []byte) int64 {
	i := bytes.Index(line, routePrefix)
	if i < 0 {
		return 0
	}
	rest := line[i+len(routePrefix):]
	dash := bytes.IndexByte(rest, '-')
	quote := bytes.IndexByte(rest, '"')
	if dash < 0 || quote < dash {
		return 0
	}
	win, err1 := strconv.ParseInt(string(rest[:dash]), 10, 64)
	j, err2 := strconv.ParseInt(string(rest[dash+1:quote]), 10, 64)
	if err1 != nil || err2 != nil || win != f.window.Load() {
		return 0
	}
	if bytes.Contains(rest[quote:], []byte(`"kind":"acquired"`)) {
		return 2*j - 1
	}
	return 2 * j
}

// measure makes the changes of one window and reports its figures. The
// changes are made on their schedule whatever the answers to earlier ones:
// each lease has a goroutine that acquires it when due and releases it
// when due (and once acquired). A broker that cannot keep up answers late
// or not within the client's timeout: such pairs are counted as failed,
// and changes/s is what was answered.
func (f *sustained) measure(b *testing.B, d time.Duration) {
	for i := range f.hist {
		f.hist[i].Store(0)
	}
	f.got.Store(0)
	live := int64(len(f.conns)) - f.ended.Load()
	changes := int(d/f.interval) &^ 1
	cpu0, self0 := cpuTime(f.pid), cpuTime(os.Getpid())
	overtaken0 := overtaken(b, f.base)
	start := time.Now()
	f.start.Store(start.UnixNano())
	win := f.window.Add(1)
	due := func(k int) time.Time { return start.Add(time.Duration(k-1) * f.interval) }
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for j := 1; j <= changes/2; j++ {
		time.Sleep(time.Until(due(2*j - 1)))
		wg.Go(func() {
			w := j % len(f.h.sessions)
			key := fmt.Sprintf("w10k/%d-%d", win, j)
			token, err := f.h.acquire(w, key)
			if err == nil {
				time.Sleep(time.Until(due(2 * j)))
				err = f.h.release(w, key, token)
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	wg.Wait()
	made := time.Since(start)
	if err := firstErr.Load(); err != nil {
		b.Logf("%d leases not both taken and given back; the first error: %v", failed.Load(), err)
	}
	// Wait for the last deliveries (at most 30 s, or until no stream is
	// left to deliver them).
	want := live * int64(changes)
	for wait := time.Now(); f.got.Load() < want && time.Since(wait) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
		if f.ended.Load() == int64(len(f.conns)) {
			break
		}
	}
	wall := time.Since(start)
	cpu, self := cpuTime(f.pid)-cpu0, cpuTime(os.Getpid())-self0
	f.window.Store(0)
	b.ReportMetric(float64(len(f.conns)), "watchers")
	b.ReportMetric(float64(changes)/made.Seconds(), "changes/s")
	b.ReportMetric(float64(f.got.Load())/float64(want), "delivered-ratio")
	b.ReportMetric(float64(f.overflows.Load()), "overflows")
	b.ReportMetric(float64(failed.Load()), "failed-pairs")
	for _, p := range []struct {
		q    float64
		unit string
	}{{0.50, "delivery-p50-µs"}, {0.99, "delivery-p99-µs"}, {1, "delivery-max-µs"}} {
		b.ReportMetric(float64(histPercentile(f.hist, p.q).Microseconds()), p.unit)
	}
	b.ReportMetric(cpu.Seconds(), "broker-cpu-s")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "broker-cores")
	b.ReportMetric(float64(cpu.Microseconds())/float64(changes), "broker-cpu-µs/change")
	b.ReportMetric(self.Seconds()/wall.Seconds(), "driver-cores")
	b.ReportMetric(overtaken(b, f.base)-overtaken0, "turns-overtaken")
}

// overtaken is the broker's count of stream writers' turns overtaken.
func overtaken(tb testing.TB, base string) float64 {
	tb.Helper()
	v, err := musterbin.ReadMetric(base, "muster_watch_writer_turns_overtaken_total")
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// histPercentile is the upper bound of the bucket holding the q-quantile.
func histPercentile(hist []atomic.Int64, q float64) time.Duration {
	var total int64
	for i := range hist {
		total += hist[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := max(int64(q*float64(total)+0.5), 1)
	var seen int64
	for i := range hist {
		if seen += hist[i].Load(); seen >= rank {
			return time.Duration(i+1) * histStep
		}
	}
	return histMax
}

func (f *sustained) close() {
	for _, c := range f.conns {
		if c != nil {
			c.Close()
		}
	}
	if f.h != nil {
		f.h.close()
	}
}
