package peers

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/musterhq/muster/sse"
)

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

// cpuTime is the CPU time (user and system, all threads) that process pid
// has used so far (cpuOf); 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, _ := cpuOf(pid)
	return d
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
