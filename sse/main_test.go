package sse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// poolSuite: with MUSTER_SSE_POOL set (make test runs the package both
// ways), the tests serve every stream through a Pool of its own, so that
// every guarantee is shown for pooled streams too.
var poolSuite = os.Getenv("MUSTER_SSE_POOL") != ""

// withPool gives opt a pool of two workers in the pool suite.
func withPool(opt Options) Options {
	if poolSuite && opt.Pool == nil {
		opt.Pool = NewPool(2, 0)
	}
	return opt
}

// proto is one way of carrying a stream: a server and a client that talk
// HTTP/1.1 or HTTP/2 over a real loopback socket.
type proto struct {
	name  string
	major int // the request's ProtoMajor the server must see
	start func(tb testing.TB, h http.Handler) (*httptest.Server, *http.Client)
}

var protos = []proto{
	{"HTTP1", 1, startHTTP1},
	{"H2C", 2, startH2C},
	{"H2CXNet", 2, startXNetH2C},
}

// startHTTP1 starts an HTTP/1.1 server; the client speaks HTTP/1.1 only.
func startHTTP1(tb testing.TB, h http.Handler) (*httptest.Server, *http.Client) {
	tb.Helper()
	srv := httptest.NewServer(h)
	dials := mustTrackDials(tb, srv)
	return srv, &http.Client{Transport: &http.Transport{DialContext: dials.dial}}
}

// startH2C starts a server speaking HTTP/1.1 and unencrypted HTTP/2 the way
// net/http does it natively (the way cmd/muster can); the client speaks
// HTTP/2 with prior knowledge.
func startH2C(tb testing.TB, h http.Handler) (*httptest.Server, *http.Client) {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	dials := mustTrackDials(tb, srv)
	return srv, &http.Client{Transport: h2cTransport(dials)}
}

func h2cTransport(dials *dialTracker) *http.Transport {
	tr := &http.Transport{Protocols: new(http.Protocols), DialContext: dials.dial}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return tr
}

// dialTracker dials TCP and remembers the connections, so that a test can
// close them all when it ends: a client connection with a stream still
// winding down is not idle, and one hijacked by the x/net h2c handler is
// not closed by httptest.Server.Close.
type dialTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

// mustTrackDials returns a dialTracker whose connections are closed, and
// then srv, when the test ends.
func mustTrackDials(tb testing.TB, srv *httptest.Server) *dialTracker {
	d := new(dialTracker)
	tb.Cleanup(func() {
		d.mu.Lock()
		for _, c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()
		srv.Close()
	})
	return d
}

func (d *dialTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

// mustServe starts a server of the given protocol whose handler serves s,
// and returns its URL, a client and the channel that receives Serve's
// result.
func mustServe(tb testing.TB, p proto, s *Stream, opt Options) (string, *http.Client, <-chan error) {
	tb.Helper()
	errc := make(chan error, 1)
	srv, client := p.start(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != p.major {
			http.Error(w, "wrong protocol "+r.Proto, http.StatusHTTPVersionNotSupported)
			return
		}
		errc <- Serve(w, r, s, withPool(opt))
	}))
	return srv.URL, client, errc
}

// mustOpen sends the watch request and checks the response headers.
func mustOpen(tb testing.TB, ctx context.Context, client *http.Client, url string) *http.Response {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		tb.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-store",
		"X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != want {
			tb.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	return resp
}

// readAll decodes events until the end of the stream, which must be clean.
func readAll(tb testing.TB, dec *Decoder) []Event {
	tb.Helper()
	var evs []Event
	for {
		ev, err := dec.Next()
		if err == io.EOF {
			return evs
		}
		if err != nil {
			tb.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
	}
}

// wait receives from c or fails the test after a generous bound; the bound
// only guards against hanging, it is not a timing assumption.
func wait[T any](tb testing.TB, c <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(20 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func waitDone(tb testing.TB, s *Stream) {
	tb.Helper()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		tb.Fatal("timed out waiting for the writer to return")
	}
}

func equalEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalEvent(a[i], b[i]) {
			return false
		}
	}
	return true
}

func equalEvent(a, b Event) bool {
	return a.Name == b.Name && a.ID == b.ID && string(a.Data) == string(b.Data)
}

func formatEvents(evs []Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&sb, "{%q %q %q} ", ev.Name, ev.ID, ev.Data)
	}
	return sb.String()
}

// stallListener shrinks the kernel send buffer of accepted connections, so
// that a client that stops reading stalls the writer after a few kilobytes,
// and tracks the write in progress on them.
type stallListener struct {
	net.Listener
	w *writeTracker
}

func (l stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	_ = c.(*net.TCPConn).SetWriteBuffer(4 << 10)
	return trackedConn{c, l.w}, nil
}

// writeTracker knows since when a connection write has been in progress.
type writeTracker struct {
	mu    sync.Mutex
	since time.Time // zero when no write is in progress
}

// stalled returns the start of the write in progress, if it has been
// blocked for at least d.
func (t *writeTracker) stalled(d time.Duration) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.since, !t.since.IsZero() && time.Since(t.since) >= d
}

type trackedConn struct {
	net.Conn
	w *writeTracker
}

func (c trackedConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	c.w.since = time.Now()
	c.w.mu.Unlock()
	defer func() {
		c.w.mu.Lock()
		c.w.since = time.Time{}
		c.w.mu.Unlock()
	}()
	return c.Conn.Write(p)
}

// startStallServer starts an HTTP/1.1 server with small send buffers and
// tracked writes, for tests with clients that never read.
func startStallServer(tb testing.TB, h http.Handler) (*httptest.Server, *writeTracker) {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	w := new(writeTracker)
	srv.Listener = stallListener{srv.Listener, w}
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv, w
}

// dialStalled sends a GET over a raw TCP connection with a small receive
// buffer, reads the response head and then never reads again.
func dialStalled(tb testing.TB, addr, path string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, addr); err != nil {
		tb.Fatal(err)
	}
	// Read the status line only, byte by byte, so nothing more is consumed.
	br := bufio.NewReaderSize(oneByte{c}, 16)
	line, err := br.ReadString('\n')
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		tb.Fatalf("status line %q", line)
	}
	return c
}

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// isTimeout reports whether err is a write deadline expiring.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
