package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The abuse report: bad HTTP/2 connections without a token wrote one log
// line each. These tests run the real binary.

const connToken = "conn-secret"

// startConnProcess runs the binary with one token and the limits section
// limits, and keeps its log lines.
func startConnProcess(tb testing.TB, limits string) (*process, *logTail) {
	tb.Helper()
	dir := tb.TempDir()
	sum := sha256.Sum256([]byte(connToken))
	cfg := fmt.Sprintf("tokens:\n  - name: t\n    sha256: %s\n    family: acme\n    grants: [\"lease://acme/**#*\"]\n%s", hex.EncodeToString(sum[:]), limits)
	path := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	p := startProcessIn(tb, filepath.Join(dir, "data"), "--addr", "127.0.0.1:0", "--config", path)
	return p, tailLogs(p)
}

// logTail collects the log lines of a process from the moment it serves.
type logTail struct {
	mu    sync.Mutex
	lines []map[string]any
}

func tailLogs(p *process) *logTail {
	t := &logTail{}
	go func() {
		for l := range p.lines {
			t.mu.Lock()
			t.lines = append(t.lines, l)
			t.mu.Unlock()
		}
	}()
	return t
}

// count is the number of lines whose message starts with one of prefixes.
func (t *logTail) count(prefixes ...string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.lines {
		msg, _ := l["msg"].(string)
		for _, p := range prefixes {
			if strings.HasPrefix(msg, p) {
				n++
				break
			}
		}
	}
	return n
}

// scrape reads one metric of the broker at addr (summed over the series
// whose line contains every filter); found is false when no series is there.
func scrape(tb testing.TB, addr, name string, filters ...string) (v float64, found bool) {
	tb.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return metricIn(string(body), name, filters...)
}

// metricIn sums the samples of metric name in Prometheus text whose line
// contains every filter.
func metricIn(text, name string, filters ...string) (sum float64, found bool) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, f := range filters {
			ok = ok && strings.Contains(line, f)
		}
		if !ok {
			continue
		}
		var v float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		sum, found = sum+v, true
	}
	return sum, found
}

// awaitGoAway reads HTTP/2 frames from c until the server's GOAWAY (it
// waits a second for the client to hang up before closing itself).
func awaitGoAway(c net.Conn) error {
	var head [9]byte
	for {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return err
		}
		size := int64(head[0])<<16 | int64(head[1])<<8 | int64(head[2])
		if head[3] == 0x7 {
			return nil
		}
		if _, err := io.CopyN(io.Discard, c, size); err != nil {
			return err
		}
	}
}

// TestProtocolErrorsLogBounded: 3,000 bad HTTP/2 connections without a
// token are each counted, and logged at most 10 a second (plus one line a
// second counting the rest), not once each.
func TestProtocolErrorsLogBounded(t *testing.T) {
	p, logs := startConnProcess(t, "")
	const conns, workers = 3000, 8
	// The client preface, then a CONTINUATION frame with no HEADERS before
	// it: a connection error (PROTOCOL_ERROR) the server logs.
	bad := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x01\x09\x00\x00\x00\x00\x00x")
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= conns {
				c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				_, _ = c.Write(bad)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if err := awaitGoAway(c); err != nil {
					t.Errorf("bad connection: %v", err)
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	var counted float64
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if counted, _ = scrape(t, p.addr, "muster_http_errors_total"); counted >= conns {
			break
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d bad connections in %v: %d log lines", conns, elapsed.Round(time.Millisecond), logs.count("http", "log lines suppressed"))
	if n, most := logs.count("http", "log lines suppressed"), 11*(int(elapsed.Seconds())+2); n > most {
		t.Errorf("%d bad connections in %v wrote %d log lines, want at most %d", conns, elapsed.Round(time.Millisecond), n, most)
	}
	if counted < conns {
		t.Errorf("muster_http_errors_total = %v, want %d", counted, conns)
	}
	if v, _ := scrape(t, p.addr, "muster_log_lines_suppressed_total", `source="http"`); v == 0 {
		t.Error(`muster_log_lines_suppressed_total{source="http"} = 0`)
	}
}
