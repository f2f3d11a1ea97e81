package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// musterBinary is the real command, built once per test run.
func musterBinary(tb testing.TB) string { tb.Helper(); return musterbin.Path(tb) }

// process is the real binary running `muster serve`.
type process struct {
	cmd   *exec.Cmd
	addr  string
	lines chan map[string]any
}

// startProcess runs `muster serve args…` and waits for its "serving" line.
func startProcess(tb testing.TB, args ...string) *process {
	tb.Helper()
	cmd := exec.Command(musterBinary(tb), append([]string{"serve", "--data-dir", tb.TempDir()}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan map[string]any, 64)}
	go readLogLines(stderr, p.lines)
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				tb.Fatal("muster exited before serving")
			}
			if l["msg"] == "muster serving" {
				p.addr = l["addr"].(string)
				return p
			}
		case <-deadline:
			tb.Fatal("muster did not start")
		}
	}
}

func readLogLines(r io.Reader, out chan<- map[string]any) {
	defer close(out)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out <- m
		} else {
			out <- map[string]any{"msg": sc.Text()}
		}
	}
}

func TestBinaryGracefulShutdown(t *testing.T) {
	p := startProcess(t, "--addr", "127.0.0.1:0")
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for l := range p.lines {
		if l["msg"] == "muster stopped" {
			stopped = true
		}
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if !stopped {
		t.Fatal("no 'muster stopped' line before exit")
	}
}

func TestBinaryDevModeRefusesPublicAddress(t *testing.T) {
	out, err := exec.Command(musterBinary(t), "serve", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir()).CombinedOutput()
	if err == nil {
		t.Fatal("dev mode served on 0.0.0.0")
	}
	if !strings.Contains(string(out), "--insecure-dev") {
		t.Fatalf("refusal does not say how to override: %s", out)
	}
	// With --insecure-dev it serves, and says it is in dev mode.
	p := startProcess(t, "--addr", "0.0.0.0:0", "--insecure-dev")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

func TestBinaryRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	cases := map[string]string{
		"ShortHash": "tokens:\n  - name: a\n    sha256: abc\n    family: f\n    grants: [\"lease://**#read\"]\n",
		"BadGrant":  "tokens:\n  - name: a\n    sha256: " + strings.Repeat("a", 64) + "\n    family: f\n    grants: [\"lease://a/b#read\"]\n",
		"NoFamily":  "tokens:\n  - name: a\n    sha256: " + strings.Repeat("a", 64) + "\n    grants: [\"lease://**#read\"]\n",
		// A misspelt key must not fall back to dev mode (all grants).
		"MisspeltKey":       "tokenz:\n  - name: a\n    sha256: " + strings.Repeat("a", 64) + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
		"NoTokens":          "tokens: []\n",
		"UnknownTokenField": "tokens:\n  - name: a\n    sha256: " + strings.Repeat("a", 64) + "\n    family: f\n    grant: [\"lease://**#read\"]\n",
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--config", cfg).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "config") {
				t.Fatalf("bad config accepted: %v %s", err, out)
			}
		})
	}
}
