package hostile

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// The corpus's tokens: the hostile family may write every fleet root of its
// own and read its leases; the probe family works leases while the hostile
// requests run.
var (
	hostileTok = musterbin.Token{Secret: "hostile-secret", Family: "hostile", Grants: []string{"fleet://**#*", "lease://hostile/**#read"}}
	readerTok  = musterbin.Token{Secret: "reader-secret", Family: "hostile", Grants: []string{"lease://hostile/**#read"}}
	probeTok   = musterbin.Token{Secret: "probe-secret", Family: "probe", Grants: []string{"lease://probe/**#*"}}
	// secondTok and thirdTok are two more families that sweep.
	secondTok = musterbin.Token{Secret: "second-secret", Family: "second", Grants: []string{"fleet://**#*"}}
	thirdTok  = musterbin.Token{Secret: "third-secret", Family: "third", Grants: []string{"fleet://**#*"}}
)

// brokerMemory is the broker's data limit (RLIMIT_DATA, through prlimit):
// a case that is not bounded ends the broker instead of the machine.
const brokerMemory = 1 << 30

// broker is the real muster binary, started under brokerMemory.
type broker struct {
	t      *testing.T
	addr   string
	dir    string
	cmd    *exec.Cmd
	logs   *musterbin.LockedBuffer
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
	cfg := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(cfg, []byte(musterbin.TokensConfig(hostileTok, readerTok, probeTok, secondTok, thirdTok)+extra), 0o600); err != nil {
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
	b := &broker{t: t, addr: addr, dir: dir, logs: &musterbin.LockedBuffer{}}
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
func (b *broker) metric(sample string) float64 { return musterbin.Metric(b.url(), sample) }

// do sends one request with tok's secret and reads the whole answer.
func (b *broker) do(ctx context.Context, tok musterbin.Token, method, path, body string) (int, http.Header, []byte, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url()+path, r)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Secret)
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
