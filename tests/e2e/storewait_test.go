package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWaitsForTheFleetStore: a broker whose PostgreSQL refuses
// connections does not exit at once (it did after 0.28 s) but tries again
// every second within the 30 s start-up window, logging "waiting for the
// fleet store" with the error and never the password; SIGTERM ends the
// wait at once with exit 0. The 30 s window itself is not waited out here.
func TestServeWaitsForTheFleetStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there once closed
	ln.Close()
	const password = "pw-do-not-log-4417"
	cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(cmd.Environ(), "MUSTER_STORE=postgres://muster:"+password+"@"+closed+"/muster?sslmode=disable&connect_timeout=2")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var all []string
	waits := 0
	deadline := time.After(6 * time.Second)
	for waits < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the broker exited after %s without waiting:\n%s", time.Since(start), strings.Join(all, "\n"))
			}
			all = append(all, l)
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "waiting for the fleet store" {
				waits++
				if e, _ := rec["err"].(string); !strings.Contains(e, "connect") {
					t.Errorf("the waiting line does not say why: %s", l)
				}
			}
		case <-deadline:
			t.Fatalf("%d waiting lines in 6 s:\n%s", waits, strings.Join(all, "\n"))
		}
	}
	elapsed := time.Since(start)
	if elapsed < 1500*time.Millisecond {
		t.Errorf("3 attempts in %s: the retries are not spaced about 1 s apart", elapsed)
	}
	t.Logf("3 attempts in %s", elapsed)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for l := range lines {
		all = append(all, l)
	}
	err = cmd.Wait()
	if time.Since(stopped) > 2*time.Second {
		t.Errorf("SIGTERM ended the wait after %s", time.Since(stopped))
	}
	if err != nil {
		t.Errorf("exit after SIGTERM while waiting: %v (want 0)", err)
	}
	out := strings.Join(all, "\n")
	if strings.Contains(out, password) {
		t.Errorf("the password is in the log:\n%s", out)
	}
	if !strings.Contains(out, "stopped before serving") {
		t.Errorf("no 'stopped before serving' line:\n%s", out)
	}
}
