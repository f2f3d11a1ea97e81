package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// leaseClient is one worker: its own session, its own routes.
type leaseClient struct {
	c       *http.Client
	base    string
	session string
	n       int
}

func post(c *http.Client, url string, body any, want int, out any) error {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer load-token")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func newLeaseClients(b *testing.B, base string, n int) []*leaseClient {
	b.Helper()
	c := Client(n)
	out := make([]*leaseClient, n)
	for i := range out {
		var s struct {
			SessionID string `json:"session_id"`
		}
		if err := post(c, base+"/v1/sessions", map[string]any{"owner_id": "load-" + strconv.Itoa(i), "ttl_ms": 600000}, 201, &s); err != nil {
			b.Fatal(err)
		}
		out[i] = &leaseClient{c: c, base: base, session: s.SessionID}
	}
	return out
}

// pair acquires a lease on a route of its own and releases it; it returns
// the acquire's latency.
func (lc *leaseClient) pair(worker int) (time.Duration, error) {
	lc.n++
	path := lc.base + "/v1/leases/load/w" + strconv.Itoa(worker) + "/r" + strconv.Itoa(lc.n%1024)
	var l struct {
		FencingToken int64 `json:"fencing_token"`
	}
	t := time.Now()
	if err := post(lc.c, path+"/acquire", map[string]any{"session_id": lc.session, "ttl_ms": 60000}, 200, &l); err != nil {
		return 0, err
	}
	acquired := time.Since(t)
	return acquired, post(lc.c, path+"/release", map[string]any{"session_id": lc.session, "fencing_token": l.FencingToken}, 204, nil)
}

var peakPairs float64 // pairs/s measured by the peak sub-benchmark of this run

// BenchmarkHTTPLeases measures, in one run and with one driver, 32
// keep-alive clients on loopback against the real broker:
//   - ceiling: a trivial request (GET /healthz) through the whole stack;
//   - peak:    acquire+release pairs, closed loop;
//   - half:    pairs paced at 50% of the peak, with p50/p99 latency.
//
// ceiling and peak also report the broker process's CPU time per request.
//
// The broker is the real binary in its own process, as in production.
func BenchmarkHTTPLeases(b *testing.B) {
	url, broker := startProcessPID(b, tokenConfig) // the real binary, in its own process
	b.Run("ceiling", func(b *testing.B) {
		c := Client(clients)
		cpu0, ok := cpuOf(broker)
		Parallel(b, clients, func(int) error { return get(c, url+"/healthz") })
		reportBrokerCPU(b, broker, cpu0, ok, b.N)
	})
	b.Run("peak", func(b *testing.B) {
		lcs := newLeaseClients(b, url, clients)
		start := time.Now()
		cpu0, ok := cpuOf(broker)
		Parallel(b, clients, func(w int) error { _, err := lcs[w].pair(w); return err })
		peakPairs = float64(b.N) / time.Since(start).Seconds()
		b.ReportMetric(2*peakPairs, "requests/s")
		reportBrokerCPU(b, broker, cpu0, ok, 2*b.N)
	})
	b.Run("half", func(b *testing.B) {
		if peakPairs == 0 {
			b.Skip("run with the peak sub-benchmark: -bench 'HTTPLeases'")
		}
		lcs := newLeaseClients(b, url, clients)
		const route = "/v1/leases/{realm}/{area}/{resource}/acquire"
		before := ServerBuckets(b, url, route)
		Paced(b, clients, peakPairs/2, func(w int) (time.Duration, error) { return lcs[w].pair(w) })
		after := ServerBuckets(b, url, route)
		// The broker's own view of the same acquires (its latency histogram):
		// the client-side tail above includes the driver, which shares the
		// machine's two cores with the broker.
		b.ReportMetric(ServerQuantile(before, after, 0.99), "server-p99-le-µs")
	})
}

// reportBrokerCPU adds the broker process's CPU time per request since
// cpu0. Unlike req/s it moves little with other work on the machine; the
// clock ticks are 10 ms, so run seconds (-benchtime 5s).
func reportBrokerCPU(b *testing.B, pid int, cpu0 time.Duration, ok bool, requests int) {
	if cpu1, ok1 := cpuOf(pid); ok && ok1 && requests > 0 {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(requests), "broker-cpu-µs/req")
	}
}

// cpuOf is the CPU time (user and system) process pid has used, read from
// /proc (Linux); ok is false elsewhere.
func cpuOf(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are fields 14 and 15 of proc_pid_stat(5), in ticks of 10 ms.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * 10 * time.Millisecond, true
}
