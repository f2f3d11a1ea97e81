package peers

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
