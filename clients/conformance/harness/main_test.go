package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The harness's own tests: the control API and the process contract,
// against the real broker binary built from the repository.

var binDir string // holds the built broker ("muster") and harness ("harness")

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "muster-harness-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// The harness is built with the race detector: a race makes it exit
	// non-zero, which every test checks.
	for _, b := range []struct{ dir, pkg, out, flag string }{
		{"../../..", "./cmd/muster", "muster", ""}, {".", ".", "harness", "-race"},
	} {
		args := []string{"build", "-o", filepath.Join(dir, b.out)}
		if b.flag != "" {
			args = append(args, b.flag)
		}
		cmd := exec.Command("go", append(args, b.pkg)...)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running harness process.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	line   startLine
	waited bool // the test waited for the exit itself
}

// mustStartHarness runs the built harness as run-harness.sh does and reads
// its one line; it is stopped (stdin closed) at cleanup.
func mustStartHarness(tb testing.TB) *proc {
	tb.Helper()
	return startHarnessWith(tb, nil, "--pg-scripts", "../../../tests/pg")
}

// startHarnessWith runs the built harness with env's variables set (an
// empty value removes one) and the extra args.
func startHarnessWith(tb testing.TB, env map[string]string, args ...string) *proc {
	tb.Helper()
	cmd := exec.Command(filepath.Join(binDir, "harness"), append([]string{"--broker", filepath.Join(binDir, "muster")}, args...)...)
	cmd.Stderr = os.Stderr
	for _, kv := range os.Environ() {
		if _, ok := env[strings.SplitN(kv, "=", 2)[0]]; !ok {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		if v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin}
	tb.Cleanup(func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil && !p.waited {
			tb.Errorf("the harness exited with %v (a data race exits 66)", err)
		}
	})
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		tb.Fatalf("reading the first line: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p.line); err != nil {
		tb.Fatalf("first line %q: %v", line, err)
	}
	go func() { // nothing more may come on stdout
		if rest, _ := io.ReadAll(rd); len(rest) > 0 {
			tb.Errorf("more output on stdout after the first line: %q", rest)
		}
	}()
	return p
}

// call sends one control request and returns the status and decoded body.
func (p *proc) call(tb testing.TB, method, path, body string) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(method, p.line.Control+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			tb.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		tb.Errorf("%s %s: %d with Content-Type %q", method, path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

// mustCall is call that wants the status.
func (p *proc) mustCall(tb testing.TB, want int, method, path, body string) map[string]any {
	tb.Helper()
	got, out := p.call(tb, method, path, body)
	if got != want {
		tb.Fatalf("%s %s %s: status %d (%v), want %d", method, path, body, got, out, want)
	}
	return out
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// TestKilledHarnessLeavesNoBroker: on Linux the broker dies with the
// harness even when the harness is killed outright.
func TestKilledHarnessLeavesNoBroker(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux only")
	}
	p := mustStartHarness(t)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.waited = true
	deadline := time.Now().Add(5 * time.Second)
	for listening(p.line.Broker) {
		if time.Now().After(deadline) {
			t.Fatal("the broker outlived the killed harness")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStopsOnStdinEOFAndSignal(t *testing.T) {
	for _, how := range []string{"stdin", "SIGTERM", "SIGINT"} {
		t.Run(how, func(t *testing.T) {
			p := mustStartHarness(t)
			for _, u := range []string{p.line.Control, p.line.Broker, p.line.Proxy} {
				if !listening(u) {
					t.Fatalf("%s is not listening", u)
				}
			}
			switch how {
			case "stdin":
				_ = p.stdin.Close()
			case "SIGTERM":
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
			default:
				_ = p.cmd.Process.Signal(syscall.SIGINT)
			}
			done := make(chan error, 1)
			p.waited = true
			go func() { done <- p.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("exit: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the harness did not stop")
			}
			for _, u := range []string{p.line.Control, p.line.Broker, p.line.Proxy} {
				if listening(u) {
					t.Errorf("%s still listening after the harness stopped", u)
				}
			}
		})
	}
}
