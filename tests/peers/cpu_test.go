package peers

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The server's own CPU per operation: every row reads the user and system
// CPU time of its server's process (/proc/<pid>/stat) before and after it
// runs and divides by the lease operations it made. Unlike a rate it is
// the server's cost alone: the driver, the other servers and the rest of
// the machine do not count (they still slow it through caches and
// scheduling, so compare it within one run too).
//
// The kernel counts in ticks of 10 ms (USER_HZ is 100 on Linux), so a row
// needs seconds of work for a figure to mean something: a 5 s row of a
// server using one core is 500 ticks, ±0.2 %. The smoke run's rows are a
// few ticks: there the column only shows that it is read.

var (
	pidsMu sync.Mutex
	pids   = map[string]int{} // server name (start's name) → its process id
)

// serverPID records the process id of server name; start calls it.
func serverPID(name string, pid int) {
	pidsMu.Lock()
	pids[name] = pid
	pidsMu.Unlock()
}

// A cpuMark is a server's CPU time at the start of a row, and the
// driver's (this process: the clients of every system).
type cpuMark struct {
	pid          int
	at, driverAt time.Duration
	ok, driverOK bool
}

// markCPU reads the CPU time of server ("muster", "ceiling", "etcd",
// "redis": the name it was started with) at the start of a row; the
// server must be running (open its row's clients first). Rows of other
// files (the fan-out's) call it and report the same way:
//
//	m := markCPU(b, "muster")
//	... b.N operations ...
//	m.report(b, b.N)
func markCPU(tb testing.TB, server string) cpuMark {
	tb.Helper()
	pidsMu.Lock()
	pid, ok := pids[server]
	pidsMu.Unlock()
	if !ok {
		tb.Fatalf("no process of server %q was started", server)
	}
	at, ok := cpuOf(pid)
	driverAt, driverOK := cpuOf(os.Getpid())
	return cpuMark{pid: pid, at: at, ok: ok, driverAt: driverAt, driverOK: driverOK}
}

// report adds server-cpu-µs/op: the server's CPU time since the mark
// divided by ops, and server-cpu-ms: that time; and driver-cpu-µs/op, the
// same for the driver (the clients' encoding, decoding and checking, which
// share the machine with the server). It reports nothing where /proc is
// missing (not Linux).
func (m cpuMark) report(b *testing.B, ops int) {
	now, ok := cpuOf(m.pid)
	if !m.ok || !ok || ops <= 0 {
		return
	}
	used := now - m.at
	b.ReportMetric(float64(used.Nanoseconds())/1e3/float64(ops), "server-cpu-µs/op")
	b.ReportMetric(float64(used.Milliseconds()), "server-cpu-ms")
	if driver, ok := cpuOf(os.Getpid()); ok && m.driverOK {
		b.ReportMetric(float64((driver-m.driverAt).Nanoseconds())/1e3/float64(ops), "driver-cpu-µs/op")
	}
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat.
const userHZ = 100

// cpuOf is the user+system CPU time process pid has used, all its threads
// together; ok is false where /proc cannot say.
func cpuOf(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(data)
}

// parseStatCPU reads utime and stime (fields 14 and 15 of proc_pid_stat(5))
// from the text of /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may hold spaces and parentheses: the fields are counted
// after its last ')'.
func parseStatCPU(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 { // f[0] is field 3 (state): utime is f[11], stime f[12]
		return 0, false
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil || u < 0 || s < 0 {
		return 0, false
	}
	return time.Duration(u+s) * time.Second / userHZ, true
}

// TestParseStatCPU reads utime+stime past a command name with spaces and
// parentheses, and this process's own line.
func TestParseStatCPU(t *testing.T) {
	line := []byte("4242 (my (odd) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 9 0 1 1 1\n")
	if got, ok := parseStatCPU(line); !ok || got != 2870*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 2.87s (287 ticks), true", got, ok)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 1"} {
		if _, ok := parseStatCPU([]byte(bad)); ok {
			t.Errorf("parseStatCPU(%q) ok, want not", bad)
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, ok := cpuOf(os.Getpid()); !ok {
		t.Error("cpuOf(self) not ok")
	}
}
