package load

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/sse"
)

// openRaw sends a watch request on a raw connection and returns it with a
// reader positioned after the response headers.
func openRaw(b *testing.B, addr, selector string) (net.Conn, *sse.Decoder) {
	b.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/leases/watch?selector=%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer load-token\r\n\r\n", selector)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("open stream: %v %v", err, resp)
	}
	return conn, sse.NewDecoder(resp.Body)
}

// BenchmarkStreams1000: 1,000 SSE streams watch lease://acme/** on one
// broker; each op is one acquire (plus its release, also delivered), and
// reports when the acquire's change reached each stream (p50/p99 of the
// per-stream delivery latency, measured from just before the request).
func BenchmarkStreams1000(b *testing.B) {
	const n = 1000
	m := startBroker(b, tokenConfig)
	addr := strings.TrimPrefix(m.URL(), "http://")
	type stream struct {
		conn net.Conn
		got  chan time.Time
	}
	streams := make([]*stream, n)
	for i := range streams {
		conn, d := openRaw(b, addr, "lease://acme/**")
		st := &stream{conn: conn, got: make(chan time.Time, 64)}
		streams[i] = st
		go func() {
			for {
				ev, err := d.Next()
				if err != nil {
					close(st.got)
					return
				}
				if ev.Name == "change" && strings.Contains(string(ev.Data), `"acquired"`) {
					st.got <- time.Now()
				}
			}
		}()
	}
	b.Cleanup(func() {
		for _, st := range streams {
			st.conn.Close()
		}
	})
	lcs := newLeaseClients(b, m.URL(), 1)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := acquireRelease(lcs[0], "lease://acme/r/x"); err != nil {
			b.Fatal(err)
		}
		for _, st := range streams {
			at, ok := <-st.got
			if !ok {
				b.Fatal("a stream ended")
			}
			lat = append(lat, at.Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(Percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(Percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}

func acquireRelease(lc *leaseClient, route string) error {
	path := lc.base + "/v1/leases/" + strings.TrimPrefix(route, "lease://")
	var l struct {
		FencingToken int64 `json:"fencing_token"`
	}
	if err := post(lc.c, path+"/acquire", map[string]any{"session_id": lc.session, "ttl_ms": 60000}, 200, &l); err != nil {
		return err
	}
	return post(lc.c, path+"/release", map[string]any{"session_id": lc.session, "fencing_token": l.FencingToken}, 204, nil)
}

// BenchmarkIdleStreamMemory: heap and stack bytes per idle watch stream,
// server side (the clients are raw connections that hold no goroutine).
func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 1000
	m := startBroker(b, tokenConfig)
	addr := strings.TrimPrefix(m.URL(), "http://")
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, n)
		var wg sync.WaitGroup
		for i := range conns {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(conn, "GET /v1/leases/watch?selector=lease://acme/** HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer load-token\r\n\r\n")
			conns[i] = conn
		}
		// Read each marker so every stream is registered and idle.
		for _, conn := range conns {
			wg.Add(1)
			go func(c net.Conn) {
				defer wg.Done()
				buf := make([]byte, 4096)
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				for total := ""; !strings.Contains(total, "event: snapshot"); {
					k, err := c.Read(buf)
					if err != nil {
						return
					}
					total += string(buf[:k])
				}
			}(conn)
		}
		wg.Wait()
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := (after.HeapInuse + after.StackInuse) - (before.HeapInuse + before.StackInuse)
		b.ReportMetric(float64(used)/n, "bytes/stream")
		for _, c := range conns {
			c.Close()
		}
	}
}
