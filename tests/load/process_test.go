package load

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// startProcess runs the real muster binary as its own process, so the
// driver's allocations and scheduling do not share a runtime with the
// broker, and returns its base URL.
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
