package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// startProcess runs the real muster binary as its own process, so the
// driver's allocations and scheduling do not share a runtime with the
// broker, and returns its base URL. lastPID is its process id.
func startProcess(b *testing.B, config string) string {
	b.Helper()
	binPath := musterbin.Path(b)
	dir := b.TempDir()
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir}
	if config != "" {
		writeFile(b, dir+"/muster.yaml", config)
		args = append(args, "--config", dir+"/muster.yaml")
	}
	cmd := exec.Command(binPath, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lastPID = cmd.Process.Pid
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "muster serving" {
				addr <- l.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(20 * time.Second):
		b.Fatal("muster did not start")
	}
	return ""
}

// processCPU is the CPU time (user and system) process pid has used, read
// from /proc (Linux); ok is false elsewhere.
var lastPID int

func processCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th (fields 14 and 15 of proc_pid_stat(5)),
	// in clock ticks of 1/100 s.
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
