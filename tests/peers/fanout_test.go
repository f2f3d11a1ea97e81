package peers

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/musterhq/muster/sse"
)

// baseBin is a muster binary built from another commit (env
// MUSTER_PEERS_BASE_BIN): when set, the watch benchmarks measure it too, as
// muster-base, beside this checkout's broker in the same run, so that a
// change is judged by same-round ratios.
func baseBin() string { return os.Getenv("MUSTER_PEERS_BASE_BIN") }

// musterBaseURL is the base URL of a broker running bin.
func musterBaseURL(tb testing.TB, bin string) string {
	return once(tb, "muster-base", func(tb testing.TB) string { return startMuster(tb, "muster-base", bin, tokenConfig) })
}

// pidOf is the process id of the server started as name (see start), or 0.
func pidOf(name string) int {
	logPath := filepath.Join(scratch, name+".log")
	procsMu.Lock()
	defer procsMu.Unlock()
	for _, c := range procs {
		if f, ok := c.Stdout.(*os.File); ok && f.Name() == logPath {
			return c.Process.Pid
		}
	}
	return 0
}

// clockTick is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux on every architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time (user and system, all threads) that process pid
// has used so far, from /proc/PID/stat; 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// openMusterH2Watch opens n SSE streams on lease://peers/watch-h2/** of
// the real broker over conns HTTP/2 connections (cleartext, prior
// knowledge: each its own client), n/conns streams multiplexed on each, as
// an SDK's observers of many selectors would share one client; and the
// pair workload's Muster leaser, which changes lease://peers/watch-h2/x.
func openMusterH2Watch(tb testing.TB, n, conns int) *fanout {
	tb.Helper()
	const area = "watch-h2"
	base := musterURL(tb)
	ctx, cancel := context.WithCancel(context.Background())
	f := &fanout{pid: pidOf("muster")}
	var trs []*http.Transport
	for range conns {
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		trs = append(trs, tr)
	}
	for i := range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/leases/watch?selector=lease://peers/"+area+"/**", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer load-token")
		resp, err := (&http.Client{Transport: trs[i%conns]}).Do(req)
		if err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			cancel()
			tb.Fatalf("open stream over HTTP/2: %v %v", err, resp)
		}
		f.got = append(f.got, readChanges(tb, sse.NewDecoder(resp.Body)))
	}
	closeHTTP := musterChanges(tb, f, base, area)
	f.close = func() {
		cancel()
		for _, tr := range trs {
			tr.CloseIdleConnections()
		}
		closeHTTP()
	}
	return f
}

// readChanges reads a stream whose snapshot is next, then, on a goroutine
// of its own, sends the time each acquired change reaches it.
func readChanges(tb testing.TB, d *sse.Decoder) chan time.Time {
	tb.Helper()
	// The snapshot marker says the stream is registered: changes from now
	// on reach it.
	for ev, err := d.Next(); ev.Name != "snapshot"; ev, err = d.Next() {
		if err != nil {
			tb.Fatal(err)
		}
	}
	got := make(chan time.Time, 16)
	go func() {
		for {
			ev, err := d.Next()
			if err != nil {
				return
			}
			if ev.Name == "change" && bytes.Contains(ev.Data, []byte(`"kind":"acquired"`)) {
				got <- time.Now()
			}
		}
	}()
	return got
}
