package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	early []map[string]any // the lines up to "muster serving"
}

// startProcess runs `muster serve args…` on a new data directory and waits
// for its "serving" line.
func startProcess(tb testing.TB, args ...string) *process {
	tb.Helper()
	return startProcessIn(tb, tb.TempDir(), args...)
}

// startProcessIn is startProcess on the data directory dir.
func startProcessIn(tb testing.TB, dir string, args ...string) *process {
	tb.Helper()
	return startCommand(tb, exec.Command(musterBinary(tb), append([]string{"serve", "--data-dir", dir}, args...)...))
}

// startCommand starts cmd, which runs `muster serve`, and waits for its
// "serving" line.
func startCommand(tb testing.TB, cmd *exec.Cmd) *process {
	tb.Helper()
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
			p.early = append(p.early, l)
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

// TestBinaryDevModeConfig: a configuration file that says dev_mode: true
// runs dev mode (no tokens: every request is served as family default)
// with the file's CORS origins, and keeps dev mode's loopback rule.
func TestBinaryDevModeConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "dev.yaml")
	const origin = "http://localhost:5173"
	if err := os.WriteFile(cfg, []byte("dev_mode: true\ncors:\n  allowed_origins: [\""+origin+"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(musterBinary(t), "serve", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir(), "--config", cfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--insecure-dev") {
		t.Fatalf("dev mode from a file served on 0.0.0.0: %v %s", err, out)
	}
	p := startProcess(t, "--addr", "127.0.0.1:0", "--config", cfg)
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/v1/leases?selector=lease://**", nil)
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("dev mode with CORS: %d, Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	resp, err = http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		DevMode bool `json:"dev_mode"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if !h.DevMode {
		t.Fatal("/healthz does not say dev_mode")
	}
}

// TestBinaryStorePasswordFromPGPASSWORD: a store URL without its password
// takes it from the standard PostgreSQL variables (PGPASSWORD here; pgx
// reads PGPASSFILE the same way), so the password is in neither argv nor
// the URL.
func TestBinaryStorePasswordFromPGPASSWORD(t *testing.T) {
	u, err := url.Parse(mustPostgresStore(t))
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		t.Skip("the test server's URL has no password to move out")
	}
	u.User = url.User(u.User.Username())
	cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "MUSTER_STORE="+u.String(), "PGPASSWORD="+password)
	p := startCommand(t, cmd)
	var backend any
	for _, l := range p.early {
		if l["msg"] == "fleet store open" {
			backend = l["backend"]
		}
	}
	if backend != "postgres" {
		t.Fatalf("fleet store open with backend %v, want postgres: %v", backend, p.early)
	}
}

// TestBinaryRejectsBadConfig: a bad configuration file stops the broker
// with exit 1 and one line that names the token, the key and what is
// expected, in the file's terms (no validator or Go type names).
// TestBinaryStoreOutOfArgv: the fleet store's URL (with its password)
// reaches the broker from --store-file or $MUSTER_STORE, never from the
// command line that ps shows; a URL the broker cannot use is refused by
// name either way, which shows it was read.
func TestBinaryStoreOutOfArgv(t *testing.T) {
	file := filepath.Join(t.TempDir(), "store")
	if err := os.WriteFile(file, []byte("mysql://u:secret@h/db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"File", []string{"--store-file", file}, ""},
		{"Env", nil, "MUSTER_STORE=mysql://u:secret@h/db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(musterBinary(t), append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "postgres:// URL") {
				t.Fatalf("%v: %s", err, out)
			}
			if strings.Contains(string(out), "secret") {
				t.Fatalf("the store's password reached the output: %s", out)
			}
		})
	}
	cmd := exec.Command(musterBinary(t), "serve", "--store", "postgres://a", "--store-file", file, "--data-dir", t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "give one") {
		t.Fatalf("--store with --store-file: %v %s", err, out)
	}
}

func TestBinaryRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	hash := strings.Repeat("a", 64)
	cases := []struct{ name, text, want string }{
		{"Empty", "", "the file is empty: it must list at least one token"},
		{"ShortHash", "tokens:\n  - name: a\n    sha256: abc\n    family: f\n    grants: [\"lease://**#read\"]\n",
			`token 1 ("a"): sha256: must be exactly 64 characters, got 3`},
		{"UpperHash", "tokens:\n  - name: a\n    sha256: " + strings.Repeat("A", 64) + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
			`token 1 ("a"): sha256: must be lowercase`},
		{"BadGrant", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: [\"lease://a/b#read\"]\n",
			`token 1 ("a"): grants: item 1 ("lease://a/b#read"): grant: lease pattern`},
		{"NoFamily", "tokens:\n  - name: ok\n    sha256: " + strings.Repeat("b", 64) + "\n    family: f\n    grants: [\"lease://**#read\"]\n" +
			"  - name: a\n    sha256: " + hash + "\n    grants: [\"lease://**#read\"]\n",
			`token 2 ("a"): family: is required`},
		{"SlashInFamily", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f/g\n    grants: [\"lease://**#read\"]\n",
			`token 1 ("a"): family: must not contain any of " /"`},
		{"NoGrants", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: []\n",
			`token 1 ("a"): grants: must be at least 1 items, got 0`},
		{"GrantNotAList", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: \"lease://**#read\"\n",
			"line 5: expected a list, found a string"},
		{"DuplicateHash", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: [\"lease://**#read\"]\n" +
			"  - name: b\n    sha256: " + hash + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
			`token 2 ("b"): sha256: the same hash as an earlier token`},
		// A misspelt key must not fall back to dev mode (all grants).
		{"MisspeltKey", "tokenz:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
			`line 1: unknown key "tokenz" at the top level (known keys: tokens`},
		{"NoTokens", "tokens: []\n", "no tokens"},
		{"DevModeWithTokens", "dev_mode: true\ntokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
			"dev_mode: true with tokens"},
		{"DevModeWithPlacement", "dev_mode: true\nplacement:\n  broker: b1\n  advertise: http://127.0.0.1:1\n", "dev_mode: true with placement"},
		{"UnknownTokenField", "tokens:\n  - name: a\n    sha256: " + hash + "\n    family: f\n    grant: [\"lease://**#read\"]\n",
			`line 5: unknown key "grant" in a token (known keys: name, sha256, family, grants`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--config", cfg)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("bad config: %v, want exit status 1\n%s", err, stderr.String())
			}
			last := lastLine(stderr.String())
			if !strings.HasPrefix(last, "muster: config") || !strings.Contains(last, tc.want) {
				t.Fatalf("message:\n  got  %s\n  want a `muster: config` line containing %s", last, tc.want)
			}
			for _, raw := range []string{"Key: '", "Error:Field", "FileConfig", "TokenConfig", "app.", "EOF", "unmarshal"} {
				if strings.Contains(last, raw) {
					t.Fatalf("message shows library text %q: %s", raw, last)
				}
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestBinarySecondBrokerOnSameDataDir: a second broker on a data directory
// in use is refused at once (well under bbolt's lock timeout), naming the
// lock file and the pid of the broker holding it.
func TestBinarySecondBrokerOnSameDataDir(t *testing.T) {
	dir := t.TempDir()
	first := startProcessIn(t, dir, "--addr", "127.0.0.1:0")
	start := time.Now()
	cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second broker: %v, want exit status 1\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("another process (pid %d) holds the lock on %s", first.cmd.Process.Pid, filepath.Join(dir, "muster.lock"))
	if got := lastLine(stderr.String()); !strings.Contains(got, want) {
		t.Fatalf("second broker says\n  %s\nwant it to contain\n  %s", got, want)
	}
	if took > time.Second {
		t.Fatalf("second broker took %v to give up; the lock is tried without waiting", took)
	}
	// Once the first has stopped, the directory is free again.
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	_ = first.cmd.Wait()
	startProcessIn(t, dir, "--addr", "127.0.0.1:0")
}

// TestBinaryPrintsURLs: at start the broker prints, on stdout, the URL to
// use and where the API docs are; the docs answer there.
func TestBinaryPrintsURLs(t *testing.T) {
	cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var lines []string
	for len(lines) < 2 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 {
		t.Fatalf("stdout: %q", lines)
	}
	m := regexp.MustCompile(`^muster is serving on (http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("first line %q does not give the URL", lines[0])
	}
	docs := m[1] + "/docs/"
	if !strings.HasSuffix(lines[1], docs) || !strings.Contains(lines[1], "API docs") {
		t.Fatalf("second line %q does not give the docs URL %s", lines[1], docs)
	}
	resp, err := http.Get(docs)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", docs, resp.StatusCode)
	}
}

// TestBinaryUsage: every command answers --help with its usage on stdout
// and exit 0; every usage error gets a message on stderr and exit 2.
func TestBinaryUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "serve"}, {"help", "token"},
		{"serve", "--help"}, {"serve", "-h"}, {"token", "--help"}, {"token", "-h"},
	} {
		t.Run("Help "+strings.Join(args, " "), func(t *testing.T) {
			stdout, stderr, code := runBinary(t, args...)
			if code != 0 || !strings.Contains(stdout, "usage:") || stderr != "" {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if strings.Contains(stdout, "sha256:") {
				t.Fatalf("--help minted a token: %s", stdout)
			}
		})
	}
	top, _, _ := runBinary(t, "--help")
	for _, flag := range []string{"--addr", "--data-dir", "--config", "--store", "--insecure-dev", "serve", "token"} {
		if !strings.Contains(top, flag) {
			t.Errorf("top-level usage does not mention %s:\n%s", flag, top)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"serve", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"serve", "--addr"}, "flag needs an argument: -addr"},
		{[]string{"token", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run("UsageError "+strings.Join(tc.args, " "), func(t *testing.T) {
			stdout, stderr, code := runBinary(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "usage:") || stdout != "" {
				t.Fatalf("exit %d, want 2 with %q and the usage on stderr\nstdout: %s\nstderr: %s", code, tc.want, stdout, stderr)
			}
		})
	}
}

// runBinary runs the real binary to its end.
func runBinary(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	cmd := exec.Command(musterBinary(tb), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		tb.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestGitignoreBinary: `go build ./cmd/muster` at the root leaves a
// `muster` that git ignores.
func TestGitignoreBinary(t *testing.T) {
	b, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(b), "\n"), "/muster") {
		t.Fatal(".gitignore does not ignore the built /muster binary")
	}
}

// TestBinaryAccessLog: log.level warn keeps the broker's info lines out,
// and log.access writes one line per request whatever the level, naming
// the route pattern and never the path: no session id, lease route or
// token reaches the log.
func TestBinaryAccessLog(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "muster.yaml")
	const secret = "access-log-secret"
	sum := sha256.Sum256([]byte(secret))
	text := "tokens:\n  - name: a\n    sha256: " + hex.EncodeToString(sum[:]) + "\n    family: f\n    grants: [\"lease://**#*\"]\n" +
		"log:\n  level: warn\n  access: true\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(musterBinary(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--config", cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	first, _ := bufio.NewReader(stdout).ReadString('\n')
	base := strings.TrimSpace(strings.TrimPrefix(first, "muster is serving on "))
	do := func(method, path, body string) map[string]any {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	s := do("POST", "/v1/sessions", `{"owner_id":"w","ttl_ms":10000}`)
	sid, _ := s["session_id"].(string)
	if sid == "" {
		t.Fatalf("session: %v", s)
	}
	do("POST", "/v1/sessions/"+sid+"/keepalive", "")
	do("POST", "/v1/leases/acme/secret-resource/x/acquire", `{"session_id":"`+sid+`","ttl_ms":5000}`)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	log := stderr.String()
	for _, secretish := range []string{sid, secret, "secret-resource"} {
		if strings.Contains(log, secretish) {
			t.Fatalf("the log holds %q:\n%s", secretish, log)
		}
	}
	var routes []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] != "request" {
			if m["level"] == "INFO" {
				t.Fatalf("an info line at level warn: %s", line)
			}
			continue
		}
		routes = append(routes, fmt.Sprintf("%s %s %v", m["method"], m["route"], m["status"]))
	}
	want := []string{"POST /v1/sessions 201", "POST /v1/sessions/{session_id}/keepalive 200", "POST /v1/leases/{realm}/{area}/{resource}/acquire 200"}
	if !slices.Equal(routes, want) {
		t.Fatalf("access lines %q, want %q\n%s", routes, want, log)
	}
}
