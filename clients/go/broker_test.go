package muster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binPath is the real broker, built from the repository once per run.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "muster-sdk-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "muster")
	build := exec.Command("go", "build", "-o", binPath, "./cmd/muster")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the broker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	stopHarness()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOpts ignores the idle keep-alive connections of http transports.
var leakOpts = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

// tokenSpec is one configured token of a test broker.
type tokenSpec struct {
	Secret string
	Family string
	Grants []string
}

// The tokens every test broker knows: two families, and a narrow reader.
var (
	tokA      = tokenSpec{"secret-a", "fam-a", []string{"lease://**#*", "fleet://**#*"}}
	tokB      = tokenSpec{"secret-b", "fam-b", []string{"lease://**#*", "fleet://**#*"}}
	tokNarrow = tokenSpec{"secret-narrow", "fam-a", []string{"lease://acme/renderers/*#read"}}
	tokens    = map[string]tokenSpec{"a": tokA, "b": tokB, "narrow": tokNarrow}
)

// broker is the real binary running `muster serve` on loopback.
type broker struct {
	dataDir string
	config  string
	addr    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs []string
}

// mustStartBroker starts a broker with a fresh data dir and the test tokens.
func mustStartBroker(tb testing.TB) *broker {
	tb.Helper()
	dir := tb.TempDir()
	b := &broker{dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "muster.yaml")}
	var sb strings.Builder
	sb.WriteString("tokens:\n")
	for name, t := range tokens {
		sum := sha256.Sum256([]byte(t.Secret))
		fmt.Fprintf(&sb, "  - name: %s\n    sha256: %s\n    family: %s\n    grants:\n", name, hex.EncodeToString(sum[:]), t.Family)
		for _, g := range t.Grants {
			fmt.Fprintf(&sb, "      - %q\n", g)
		}
	}
	if err := os.WriteFile(b.config, []byte(sb.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	b.start(tb, "127.0.0.1:0")
	tb.Cleanup(b.kill)
	return b
}

func (b *broker) url() string { return "http://" + b.addr }

func (b *broker) start(tb testing.TB, addr string) {
	tb.Helper()
	if err := b.tryStart(addr); err != nil {
		tb.Fatal(err)
	}
}

// tryStart runs `muster serve` on addr and waits for its serving line.
func (b *broker) tryStart(addr string) error {
	cmd := exec.Command(binPath, "serve", "--addr", addr, "--data-dir", b.dataDir, "--config", b.config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	serving := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "muster serving" {
				serving <- l.Addr
			}
			b.mu.Lock()
			b.logs = append(b.logs, sc.Text())
			b.mu.Unlock()
		}
	}()
	b.mu.Lock()
	b.cmd = cmd
	b.mu.Unlock()
	select {
	case b.addr = <-serving:
		return nil
	case <-exited:
		b.kill()
		return fmt.Errorf("the broker exited before serving: %s", b.logTail())
	case <-time.After(30 * time.Second):
		b.kill()
		return fmt.Errorf("the broker did not start: %s", b.logTail())
	}
}

func (b *broker) logTail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.logs[max(0, len(b.logs)-5):], "\n")
}

// kill stops the broker process at once (SIGKILL) and waits for it.
func (b *broker) kill() {
	b.mu.Lock()
	cmd := b.cmd
	b.cmd = nil
	b.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

// restart kills the broker and starts a new process on the same address
// and data dir: a new epoch, an empty lease universe, the same fleets.
func (b *broker) restart(tb testing.TB) {
	tb.Helper()
	b.kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := b.tryStart(b.addr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newClient is a client of b (or of any URL) with token name tok ("" for
// none) and its own transport, closed at cleanup.
func newClient(tb testing.TB, base, tok string) *Client {
	tb.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	tb.Cleanup(tr.CloseIdleConnections)
	opts := []Option{WithHTTPClient(&http.Client{Transport: tr})}
	if tok != "" {
		opts = append(opts, WithToken(tokens[tok].Secret))
	}
	c, err := New(base, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// mustSession creates a session closed at cleanup.
func mustSession(tb testing.TB, c *Client, owner string, ttl time.Duration) *Session {
	tb.Helper()
	s, err := c.NewSession(context.Background(), owner, ttl)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func ctxT(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
