// Package peers measures Muster beside its peers on one machine, in one
// run, with one driver (tests/load): Redis, etcd and a trivial net/http
// handler (the loopback HTTP ceiling), each a real server in its own
// process on a loopback port. Compare ratios within one run only: the
// machines are shared and noisy.
//
// It is its own module so that the etcd and Redis clients (and gRPC under
// the former) stay out of the broker's dependency graph.
package peers

import (
	"bufio"
	"context"
	"encoding/json"
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

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ceilingEnv, when set in the environment of this test binary, makes it
// serve the ceiling handler instead of running tests (see TestMain).
const ceilingEnv = "MUSTER_PEERS_CEILING"

// tokenConfig has one token "load-token" (family load, all grants), the
// same as tests/load: Muster is measured with authentication on.
const tokenConfig = `tokens:
  - name: load
    sha256: 1ccaaab79e6619e6421c80231ea5f64764aba59997a9c66ac9c4f0788a2ac2ae
    family: load
    grants: ["lease://**#*", "fleet://**#*"]
`

var (
	procsMu sync.Mutex
	procs   []*exec.Cmd // every server started, killed by TestMain
	scratch string      // data dirs, on tmpfs when the machine has one
)

func TestMain(m *testing.M) {
	if os.Getenv(ceilingEnv) != "" {
		serveCeiling()
		return
	}
	base := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	var err error
	if scratch, err = os.MkdirTemp(base, "muster-peers-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	procsMu.Lock()
	for _, c := range procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	procsMu.Unlock()
	os.RemoveAll(scratch)
	os.Exit(code)
}

// start runs a server process that dies with this one; its output goes to
// a log file in the scratch dir, whose path is returned.
func start(tb testing.TB, name string, args []string, env ...string) (*exec.Cmd, string) {
	tb.Helper()
	logPath := filepath.Join(scratch, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	logf.Close()
	procsMu.Lock()
	procs = append(procs, cmd)
	procsMu.Unlock()
	serverPID(name, cmd.Process.Pid)
	return cmd, logPath
}

// freePort returns a loopback port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitFor polls ready until it succeeds or 20 s pass; the log is shown on
// failure.
func waitFor(tb testing.TB, name, logPath string, ready func() error) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			tb.Fatalf("%s did not start: %v\n%s", name, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// once memoizes one server per name for the whole test binary.
var (
	onceMu sync.Mutex
	urls   = map[string]string{}
)

func once(tb testing.TB, name string, startIt func(testing.TB) string) string {
	tb.Helper()
	onceMu.Lock()
	defer onceMu.Unlock()
	if u, ok := urls[name]; ok {
		return u
	}
	u := startIt(tb)
	urls[name] = u
	return u
}

// redisAddr is the address of a real redis-server without persistence (the
// leases live in memory, as Muster's do).
func redisAddr(tb testing.TB) string {
	return once(tb, "redis", func(tb testing.TB) string {
		port := strconv.Itoa(freePort(tb))
		dir := filepath.Join(scratch, "redis")
		os.MkdirAll(dir, 0o700)
		_, logPath := start(tb, "redis", []string{"redis-server", "--bind", "127.0.0.1", "--port", port,
			"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no"})
		addr := "127.0.0.1:" + port
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		waitFor(tb, "redis-server", logPath, func() error {
			return c.Ping(context.Background()).Err()
		})
		return addr
	})
}

// etcdEndpoint is the client URL of a real single-member etcd whose data
// dir is on tmpfs (when the machine has /dev/shm), so fsync is not what is
// compared.
func etcdEndpoint(tb testing.TB) string {
	return once(tb, "etcd", func(tb testing.TB) string {
		client := "http://127.0.0.1:" + strconv.Itoa(freePort(tb))
		peer := "http://127.0.0.1:" + strconv.Itoa(freePort(tb))
		_, logPath := start(tb, "etcd", []string{"etcd", "--name", "peers",
			"--data-dir", filepath.Join(scratch, "etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "peers=" + peer, "--logger", "zap", "--log-level", "error"})
		c, err := newEtcdClient(client)
		if err != nil {
			tb.Fatal(err)
		}
		defer c.Close()
		waitFor(tb, "etcd", logPath, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := c.Get(ctx, "health")
			return err
		})
		return client
	})
}

// newEtcdClient is a client of one endpoint that logs nothing (its retry
// warnings while etcd starts are expected).
func newEtcdClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// musterURL is the base URL of the real muster binary, built from this
// checkout, serving with tokenConfig.
func musterURL(tb testing.TB) string {
	return serveMuster(tb, "muster", func(tb testing.TB) string { return buildMuster(tb) })
}

// serveMuster starts (once per name) the muster binary that bin returns,
// serving with tokenConfig on its own data dir, and returns its base URL.
func serveMuster(tb testing.TB, name string, bin func(testing.TB) string) string {
	return once(tb, name, func(tb testing.TB) string { return startMuster(tb, name, bin(tb), tokenConfig) })
}

// startMuster starts the muster binary bin as a broker named name (its
// data dir and log are named after it), serving with config, and returns
// its base URL.
func startMuster(tb testing.TB, name, bin, config string) string {
	tb.Helper()
	dir := filepath.Join(scratch, name)
	os.MkdirAll(dir, 0o700)
	cfg := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	_, logPath := start(tb, name, []string{bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--config", cfg})
	var url string
	waitFor(tb, name, logPath, func() error {
		a, err := logged(logPath, "muster serving", "addr")
		url = "http://" + a
		return err
	})
	return url
}

// buildMuster builds ./cmd/muster of the checkout this module sits in.
func buildMuster(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(scratch, "muster-bin")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/muster")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build muster: %v\n%s", err, out)
	}
	return bin
}

// logged finds the first JSON log line with msg and returns its field.
func logged(logPath, msg, field string) (string, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == msg {
			if v, ok := l[field].(string); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("no %q line yet", msg)
}

// ceilingURL is the base URL of the ceiling: this test binary re-run as a
// trivial net/http server in its own process, as Muster runs in its own.
func ceilingURL(tb testing.TB) string {
	return once(tb, "ceiling", func(tb testing.TB) string {
		self, err := os.Executable()
		if err != nil {
			tb.Fatal(err)
		}
		_, logPath := start(tb, "ceiling", []string{self}, ceilingEnv+"=1")
		var url string
		waitFor(tb, "ceiling", logPath, func() error {
			a, err := logged(logPath, "ceiling serving", "addr")
			url = "http://" + a
			return err
		})
		return url
	})
}

// serveCeiling serves the same two JSON POSTs as Muster's lease routes
// (and session creation) with nothing but net/http and encoding/json: it
// decodes each body and answers a canned body of the broker's size. It is
// the most any HTTP/JSON service can do on this machine with this driver.
func serveCeiling() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	line, _ := json.Marshal(map[string]string{"msg": "ceiling serving", "addr": ln.Addr().String()})
	fmt.Println(string(line))
	const lease = `{"acquired_at":"2026-12-01T03:09:39.770542304Z","expires_at":"2026-12-01T03:10:39.770542304Z","fencing_token":1,"outcome":"acquired","renewals":0,"route":"lease://load/w1/r1"}`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			SessionID    string `json:"session_id"`
			TTLMs        int64  `json:"ttl_ms"`
			FencingToken int64  `json:"fencing_token"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/sessions":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"session_id":"ceiling"}`)
		case strings.HasSuffix(r.URL.Path, "/acquire"):
			_, _ = io.WriteString(w, lease)
		case strings.HasSuffix(r.URL.Path, "/release"):
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	})
	_ = (&http.Server{Handler: h}).Serve(ln)
}
