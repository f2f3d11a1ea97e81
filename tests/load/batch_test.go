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
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// batchSize is the number of lease operations per batch request.
const batchSize = 64

// batchClient is one worker of the batch benchmark: its own session and
// its own batchSize routes, acquired by one request and released by the
// next (or renewed, request after request).
type batchClient struct {
	c       *http.Client
	url     string
	session string
	routes  []string
	acquire []byte   // the acquire body never changes
	tokens  []int64  // the tokens of the current grants; nil when released
	body    []byte   // reused to build release and extend bodies
	results []result // reused to decode answers
}

// result is what the driver reads of one operation's result.
type result struct {
	OK    bool
	Code  string
	Token int64 // the lease's fencing token; 0 after a release
}

// batchRound makes the routes of each set of clients their own: the
// benchmark function runs more than once, and earlier clients' sessions
// still hold their leases.
var batchRound int

func newBatchClients(b *testing.B, base string, n int) []*batchClient {
	b.Helper()
	batchRound++
	lcs := newLeaseClients(b, base, n) // one session each
	out := make([]*batchClient, n)
	for w, lc := range lcs {
		bc := &batchClient{c: lc.c, url: base + "/v1/leases/batch", session: lc.session}
		ops := make([]map[string]any, batchSize)
		for i := range ops {
			bc.routes = append(bc.routes, fmt.Sprintf("lease://load/g%d-w%d/r%d", batchRound, w, i))
			ops[i] = map[string]any{"op": "acquire", "route": bc.routes[i], "ttl_ms": 60000}
		}
		bc.acquire, _ = json.Marshal(map[string]any{"session_id": lc.session, "ops": ops})
		out[w] = bc
	}
	return out
}

// tokenBody builds a release or extend body for the current tokens.
func (bc *batchClient) tokenBody(op string) []byte {
	buf := append(bc.body[:0], `{"session_id":"`...)
	buf = append(buf, bc.session...)
	buf = append(buf, `","ops":[`...)
	for i, r := range bc.routes {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"op":"`...)
		buf = append(buf, op...)
		buf = append(buf, `","route":"`...)
		buf = append(buf, r...)
		buf = append(buf, `","fencing_token":`...)
		buf = strconv.AppendInt(buf, bc.tokens[i], 10)
		if op == "extend" {
			buf = append(buf, `,"ttl_ms":60000`...)
		}
		buf = append(buf, '}')
	}
	bc.body = append(buf, "]}"...)
	return bc.body
}

// send posts one batch and checks that every operation succeeded.
func (bc *batchClient) send(body []byte) error {
	req, _ := http.NewRequest("POST", bc.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer load-token")
	resp, err := bc.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("batch: %d %s", resp.StatusCode, raw)
	}
	return bc.scan(raw)
}

// scan reads the answer's results with a streaming decoder (no reflection:
// the driver shares the cores with the broker) and checks that every
// operation succeeded, keeping the fencing tokens of the leases.
func (bc *batchClient) scan(raw []byte) error {
	bc.results = bc.results[:0]
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.ReadToken(); err != nil { // {
		return err
	}
	for dec.PeekKind() == '"' {
		name, _ := dec.ReadToken()
		if name.String() != "results" {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		dec.ReadToken() // [
		for dec.PeekKind() == '{' {
			dec.ReadToken()
			var r result
			for dec.PeekKind() == '"' {
				name, _ := dec.ReadToken()
				var err error
				switch name.String() {
				case "ok":
					var v jsontext.Token
					v, err = dec.ReadToken()
					r.OK = err == nil && v.Kind() == 't'
				case "code":
					var v jsontext.Token
					v, err = dec.ReadToken()
					r.Code = v.String()
				case "lease":
					r.Token, err = leaseToken(dec)
				default:
					err = dec.SkipValue()
				}
				if err != nil {
					return err
				}
			}
			dec.ReadToken() // }
			if !r.OK {
				return fmt.Errorf("batch op %d: %s", len(bc.results), r.Code)
			}
			bc.results = append(bc.results, r)
		}
		if _, err := dec.ReadToken(); err != nil { // ]
			return err
		}
	}
	if len(bc.results) != batchSize {
		return fmt.Errorf("batch: %d results", len(bc.results))
	}
	return nil
}

// leaseToken reads a lease object and returns its fencing token.
func leaseToken(dec *jsontext.Decoder) (int64, error) {
	var token int64
	if _, err := dec.ReadToken(); err != nil { // {
		return 0, err
	}
	for dec.PeekKind() == '"' {
		name, _ := dec.ReadToken()
		if name.String() != "fencing_token" {
			if err := dec.SkipValue(); err != nil {
				return 0, err
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil {
			return 0, err
		}
		token = v.Int()
	}
	_, err := dec.ReadToken() // }
	return token, err
}

// step acquires the client's routes when it holds none and releases them
// when it holds them: batchSize lease operations per request.
func (bc *batchClient) step() error {
	if bc.tokens == nil {
		if err := bc.send(bc.acquire); err != nil {
			return err
		}
		bc.tokens = make([]int64, batchSize)
		for i, r := range bc.results {
			if r.Token <= 0 {
				return fmt.Errorf("acquire %d: no fencing token", i)
			}
			bc.tokens[i] = r.Token
		}
		return nil
	}
	err := bc.send(bc.tokenBody("release"))
	bc.tokens = nil
	return err
}

// renew extends every route the client holds: batchSize renewals per
// request, what a worker holding many leases sends once per interval.
func (bc *batchClient) renew() error {
	if bc.tokens == nil {
		return bc.step()
	}
	return bc.send(bc.tokenBody("extend"))
}

// BenchmarkHTTPLeaseBatches measures lease operations per second over HTTP
// with batches of 64, against the real binary in its own process, 32
// keep-alive clients on loopback (closed loop), as BenchmarkHTTPLeases:
//   - acquire-release: each client alternates a batch of 64 acquires of its
//     own free routes and a batch of 64 releases of them;
//   - extend: each client renews its 64 held leases, batch after batch.
//
// lease-ops/s is 64 × requests/s; every operation of every answer is
// checked to have succeeded. The driver (encoding, decoding, checking)
// shares the machine's cores with the broker. Because the machine is
// shared, the CPU each side spent is reported too: broker-cpu-µs/req, and
// lease-ops/cpu-s = operations / (broker + driver CPU seconds), which is
// what two idle cores would sustain at most (×2) with this driver.
func BenchmarkHTTPLeaseBatches(b *testing.B) {
	url := startProcess(b, tokenConfig)
	pid := newestChild(b)
	for _, c := range []struct {
		name string
		op   func(*batchClient) error
	}{
		{"acquire-release", (*batchClient).step},
		{"extend", (*batchClient).renew},
	} {
		b.Run(c.name, func(b *testing.B) {
			bcs := newBatchClients(b, url, clients)
			start, broker0, driver0 := time.Now(), brokerCPU(b, pid), selfCPU(b)
			Parallel(b, clients, func(w int) error { return c.op(bcs[w]) })
			elapsed, broker, driver := time.Since(start), brokerCPU(b, pid)-broker0, selfCPU(b)-driver0
			ops := float64(b.N * batchSize)
			b.ReportMetric(ops/elapsed.Seconds(), "lease-ops/s")
			b.ReportMetric(float64(broker.Microseconds())/float64(b.N), "broker-cpu-µs/req")
			b.ReportMetric(ops/(broker+driver).Seconds(), "lease-ops/cpu-s")
		})
	}
}

// procStat returns the fields of /proc/<pid>/stat after the command name
// (which may contain spaces): field 3 of proc_pid_stat(5) is f[0].
func procStat(pid string) ([]string, error) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:])), nil
}

// newestChild is the process id of the most recently started child of
// this process: the broker startProcess has just started (Linux).
func newestChild(b *testing.B) int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	pid, newest := 0, int64(-1)
	for _, d := range dirs {
		f, err := procStat(d.Name())
		if err != nil || len(f) < 20 || f[1] != self { // f[1]: ppid
			continue
		}
		if start, _ := strconv.ParseInt(f[19], 10, 64); start > newest { // f[19]: starttime
			pid, newest = atoi(d.Name()), start
		}
	}
	if pid == 0 {
		b.Fatal("no broker process found among this process's children")
	}
	return pid
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// brokerCPU is the user+system CPU time of process pid so far (Linux).
func brokerCPU(b *testing.B, pid int) time.Duration {
	f, err := procStat(strconv.Itoa(pid))
	if err != nil || len(f) < 13 {
		b.Fatalf("reading the broker's CPU time: %v", err)
	}
	// utime and stime: fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// selfCPU is the user+system CPU time of the driver (this process) so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
