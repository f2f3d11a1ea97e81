package hostile

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// The corpus's tokens: the hostile family may write every fleet root of its
// own and read its leases; the probe family works leases while the hostile
// requests run.
var (
	hostileTok = token{"hostile-secret", "hostile", []string{"fleet://**#*", "lease://hostile/**#read"}}
	readerTok  = token{"reader-secret", "hostile", []string{"lease://hostile/**#read"}}
	probeTok   = token{"probe-secret", "probe", []string{"lease://probe/**#*"}}
)

type token struct {
	secret, family string
	grants         []string
}

// brokerMemory is the broker's data limit (RLIMIT_DATA, through prlimit):
// a case that is not bounded ends the broker instead of the machine.
const brokerMemory = 1 << 30

// broker is the real muster binary, started under brokerMemory.
type broker struct {
	t      *testing.T
	addr   string
	dir    string
	cmd    *exec.Cmd
	logs   *lockedBuffer
	exited chan struct{}
}

// binary is the broker under test: MUSTER_BIN when set (to run the corpus
// against another build), else a fresh build of this module.
func binary(t *testing.T) string {
	if p := os.Getenv("MUSTER_BIN"); p != "" {
		return p
	}
	return musterbin.Path(t)
}

// startBroker writes the configuration (the tokens, then extra), lets seed
// write the data directory first (the store as an older broker left it),
// and starts the broker.
func startBroker(t *testing.T, extra string, seed func(dataDir string)) *broker {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux) is needed to bound the broker: %v", err)
	}
	dir := t.TempDir()
	var sb strings.Builder
	sb.WriteString("tokens:\n")
	for i, tk := range []token{hostileTok, readerTok, probeTok} {
		sum := sha256.Sum256([]byte(tk.secret))
		fmt.Fprintf(&sb, "  - name: t%d\n    sha256: %s\n    family: %s\n    grants:\n", i, hex.EncodeToString(sum[:]), tk.family)
		for _, g := range tk.grants {
			fmt.Fprintf(&sb, "      - %q\n", g)
		}
	}
	sb.WriteString(extra)
	cfg := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(cfg, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if seed != nil {
		seed(data)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b := &broker{t: t, addr: addr, dir: dir, logs: &lockedBuffer{}}
	b.cmd = exec.Command("prlimit", "--data="+strconv.Itoa(brokerMemory), "--",
		binary(t), "serve", "--addr", addr, "--data-dir", data, "--config", cfg)
	b.cmd.Stderr = b.logs
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.exited = make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	t.Cleanup(b.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(b.url() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return b
			}
		}
		if time.Now().After(deadline) || b.dead() {
			t.Fatalf("broker did not start:\n%s", b.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *broker) url() string { return "http://" + b.addr }

func (b *broker) dead() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

func (b *broker) stop() {
	if b.dead() {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(15 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// status reads one field of /proc/<pid>/status, in bytes for a kB figure.
func (b *broker) status(field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n << 10
		}
	}
	return -1
}

// peak samples the broker's anonymous resident memory (RssAnon: its heap
// and stacks; the pages of the bbolt file it maps are the kernel's to
// reclaim and are not counted) every millisecond until stop is called,
// which returns the peak above the first sample.
func (b *broker) peak() (stop func() int64) {
	base := b.status("RssAnon")
	done := make(chan struct{})
	out := make(chan int64, 1)
	go func() {
		top := base
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				out <- max(top, b.status("RssAnon")) - base
				return
			case <-tick.C:
				top = max(top, b.status("RssAnon"))
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-out
	}
}

// children lists the broker's child processes (its sweep workers).
func (b *broker) children() []int {
	var pids []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", b.cmd.Process.Pid))
	for _, task := range tasks {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", b.cmd.Process.Pid, task.Name()))
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// metric reads one sample of /metrics (name with its labels, as printed).
func (b *broker) metric(sample string) float64 {
	resp, err := http.Get(b.url() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

// do sends one request with tok's secret and reads the whole answer.
func (b *broker) do(ctx context.Context, tok token, method, path, body string) (int, http.Header, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url()+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out, err
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
