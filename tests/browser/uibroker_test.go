package browser

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// The token of the dashboard tests: family acme, every right under acme and
// nothing else, so that lease://other/** is forbidden.
const (
	uiToken  = "ui-test-token-1"
	uiFamily = "acme"
)

// uiBroker is the real muster binary serving on a fixed loopback port with
// a configuration file, so that it can be stopped and started again on the
// same address and data directory (a restart, with a new epoch).
type uiBroker struct {
	t       *testing.T
	addr    string
	dataDir string
	config  string
	cmd     *exec.Cmd
	exited  chan struct{}
	// Epoch of the running process, from its "muster serving" line.
	Epoch string
}

// startUIBroker writes a configuration (the test token, and CORS for
// origins) and starts the broker.
func startUIBroker(t *testing.T, origins ...string) *uiBroker {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(uiToken))
	cfg := fmt.Sprintf("tokens:\n  - name: ui-test\n    sha256: %s\n    family: %s\n    grants: [\"lease://acme/**#*\", \"fleet://acme/**#*\"]\n",
		hex.EncodeToString(sum[:]), uiFamily)
	if len(origins) > 0 {
		q := make([]string, len(origins))
		for i, o := range origins {
			q[i] = fmt.Sprintf("%q", o)
		}
		cfg += "cors:\n  allowed_origins: [" + strings.Join(q, ", ") + "]\n"
	}
	b := &uiBroker{t: t, addr: freeAddr(t), dataDir: filepath.Join(dir, "data"), config: filepath.Join(dir, "muster.yaml")}
	if err := os.WriteFile(b.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() {
		if b.cmd != nil {
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	})
	return b
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// URL is the broker's base URL (the same across restarts).
func (b *uiBroker) URL() string { return "http://" + b.addr }

// Start runs `muster serve` and waits for its "muster serving" line.
func (b *uiBroker) Start() {
	b.t.Helper()
	cmd := exec.Command(musterbin.Path(b.t), "serve", "--addr", b.addr, "--data-dir", b.dataDir, "--config", b.config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.cmd, b.exited = cmd, make(chan struct{})
	serving := make(chan string, 1)
	var logs bytes.Buffer
	go func() {
		defer close(b.exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Epoch string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "muster serving" {
				serving <- l.Epoch
			}
			if logs.Len() < 16<<10 {
				logs.Write(append(sc.Bytes(), '\n'))
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	select {
	case b.Epoch = <-serving:
	case <-b.exited:
		b.t.Fatalf("muster exited before serving:\n%s", logs.String())
	case <-time.After(20 * time.Second):
		b.t.Fatalf("muster did not start within 20s:\n%s", logs.String())
	}
}

// Stop ends the broker gracefully (SIGTERM: its streams end with
// `event: shutdown`) and waits for the process to exit.
func (b *uiBroker) Stop() {
	b.t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatal(err)
	}
	select {
	case <-b.exited:
	case <-time.After(15 * time.Second):
		b.t.Fatal("muster did not exit within 15s of SIGTERM")
	}
	b.cmd = nil
}

// curl runs the real curl against the broker with the test token and
// decodes the JSON answer (nil for an empty body). It fails the test on a
// status other than want.
func (b *uiBroker) curl(method, path, body string, want int) map[string]any {
	b.t.Helper()
	args := []string{"-sS", "-X", method, "-H", "Authorization: Bearer " + uiToken, "-w", "\n%{http_code}", b.URL() + path}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		b.t.Fatalf("curl %s %s: %v", method, path, err)
	}
	text := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(text, '\n')
	payload, code := "", text
	if i >= 0 {
		payload, code = text[:i], text[i+1:]
	}
	if code != fmt.Sprint(want) {
		b.t.Fatalf("curl %s %s: status %s, want %d: %s", method, path, code, want, payload)
	}
	if strings.TrimSpace(payload) == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		b.t.Fatalf("curl %s %s: %v: %s", method, path, err, payload)
	}
	return m
}

// holding is a lease acquired with curl.
type holding struct {
	route, session string
	fencing        json.Number
}

// acquire opens a session for owner and acquires route (lease://acme/…) for ttl.
func (b *uiBroker) acquire(owner, route string, ttl time.Duration) holding {
	b.t.Helper()
	s := b.curl("POST", "/v1/sessions", fmt.Sprintf(`{"owner_id":%q,"ttl_ms":60000}`, owner), 201)
	sid, _ := s["session_id"].(string)
	l := b.curl("POST", "/v1/leases/"+strings.TrimPrefix(route, "lease://")+"/acquire",
		fmt.Sprintf(`{"session_id":%q,"ttl_ms":%d}`, sid, ttl.Milliseconds()), 200)
	ft, _ := l["fencing_token"].(float64)
	return holding{route: route, session: sid, fencing: json.Number(fmt.Sprint(int64(ft)))}
}

// release releases a holding with curl.
func (b *uiBroker) release(h holding) {
	b.t.Helper()
	b.curl("POST", "/v1/leases/"+strings.TrimPrefix(h.route, "lease://")+"/release",
		fmt.Sprintf(`{"session_id":%q,"fencing_token":%s}`, h.session, h.fencing), 204)
}
