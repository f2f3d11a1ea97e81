// Package proxy runs the reverse-proxy recipes of deploy/proxy in front of
// the real broker: Debian's nginx with deploy/proxy/nginx.conf as it is
// committed (only its addresses, certificate paths and prefix are the
// test's), over TLS, HTTP/2 to the client and HTTP/1.1 keep-alive to the
// broker. tests/proxy/install.sh installs nginx (tests/run.sh calls it);
// without nginx the test fails, unless MUSTER_TEST_NGINX=off, in which case
// it is skipped, saying so. MUSTER_NGINX names another nginx binary.
//
// Through nginx, at the root and under /muster/ (the recipe's sub-path):
//   - a watch stream starts with the snapshot marker, a lease acquired through
//     nginx arrives on it within 1 s, and the broker's 15 s heartbeat passes;
//   - an acquire waits 25 s for a holder that releases then, and is granted;
//   - /ui/ and /docs/ under /muster/: the page, every file it references
//     (resolved against the page's URL), the contract by the page's relative
//     URL and the API root the dashboard computes all answer 200;
//   - a 2 MB request body (a fleet plan) reaches the broker.
//
// And, to show that the recipe's proxy_read_timeout is what keeps those
// alive, the same recipe with it lowered to 3 s answers the long poll with
// 504 and cuts the stream before its heartbeat. Everything runs in parallel:
// the test takes about 26 s, the 25 s wait.
package proxy

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

const (
	// EnvSwitch set to "off" skips the test (explicitly, with the reason).
	EnvSwitch = "MUSTER_TEST_NGINX"
	// EnvBinary names the nginx binary to run instead of the one on PATH.
	EnvBinary = "MUSTER_NGINX"

	recipe    = "../../deploy/proxy/nginx.conf"
	subPath   = "/muster"
	heartbeat = 15 * time.Second // sse.DefaultHeartbeat, fixed in the broker
	longPoll  = 25 * time.Second
)

// nginxBinary finds nginx, or skips (MUSTER_TEST_NGINX=off) or fails.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if os.Getenv(EnvSwitch) == "off" {
		t.Skipf("%s=off: the nginx reverse-proxy test is skipped", EnvSwitch)
	}
	candidates := []string{os.Getenv(EnvBinary)}
	if p, err := exec.LookPath("nginx"); err == nil {
		candidates = append(candidates, p)
	}
	candidates = append(candidates, "/usr/sbin/nginx")
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	t.Fatalf("no nginx found: install it with tests/proxy/install.sh, point %s at a binary, or set %s=off to skip this test", EnvBinary, EnvSwitch)
	return ""
}

// startBroker runs the real `muster serve` in dev mode on a loopback port
// and returns its address.
func startBroker(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(musterbin.Path(t), "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	serving := make(chan string, 1)
	logs := &musterbin.LockedBuffer{}
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "muster serving" {
				serving <- l.Addr
			}
			if len(logs.String()) < 16<<10 {
				_, _ = logs.Write(append(sc.Bytes(), '\n'))
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case addr := <-serving:
		return addr
	case <-exited:
		t.Fatalf("muster exited before serving:\n%s", logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("muster did not start:\n%s", logs.String())
	}
	return ""
}

// freePort returns a loopback port nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// writeCertificate writes a self-signed certificate for 127.0.0.1 into dir
// and returns a pool that trusts it.
func writeCertificate(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "muster.example.com"},
		DNSNames:              []string{"muster.example.com"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// proxy is one nginx running the recipe.
type proxy struct {
	base   string // https://127.0.0.1:port
	plain  string // http://127.0.0.1:port, the redirecting server
	client *http.Client
	errLog string
}

// render is the recipe with the test's addresses and files. Every
// replaced line must be in the recipe as committed, so the test follows it.
func render(t *testing.T, broker, httpsPort, httpPort, certFile, keyFile string, edits map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for old, repl := range map[string]string{
		"server 127.0.0.1:7420;": "server " + broker + ";",
		"listen 80;":             "listen 127.0.0.1:" + httpPort + ";",
		"listen 443 ssl http2;":  "listen 127.0.0.1:" + httpsPort + " ssl http2;",
		"ssl_certificate     /etc/ssl/muster/fullchain.pem;": "ssl_certificate     " + certFile + ";",
		"ssl_certificate_key /etc/ssl/muster/privkey.pem;":   "ssl_certificate_key " + keyFile + ";",
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("%s no longer holds %q: update the test with the recipe", recipe, old)
		}
		conf = strings.ReplaceAll(conf, old, repl)
	}
	for old, repl := range edits {
		if !strings.Contains(conf, old) {
			t.Fatalf("%s no longer holds %q", recipe, old)
		}
		conf = strings.ReplaceAll(conf, old, repl)
	}
	return conf
}

// startNginx runs nginx (in the foreground, as the current user, everything
// under a temporary prefix) with the recipe in front of broker. edits
// replaces more of the recipe's text.
func startNginx(t *testing.T, bin, broker string, edits map[string]string) *proxy {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile, pool := writeCertificate(t, dir)
	httpsPort, httpPort := freePort(t), freePort(t)
	site := filepath.Join(dir, "muster.conf")
	if err := os.WriteFile(site, []byte(render(t, broker, httpsPort, httpPort, certFile, keyFile, edits)), 0o600); err != nil {
		t.Fatal(err)
	}
	var main strings.Builder
	if os.Geteuid() == 0 {
		// Workers would otherwise switch to nobody, who cannot read dir.
		u, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&main, "user %s;\n", u.Username)
	}
	fmt.Fprintf(&main, `daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 512; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[2]s;
}
`, dir, site)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(main.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	errLog := filepath.Join(dir, "error.log")
	var out bytes.Buffer
	cmd := exec.Command(bin, "-p", dir+"/", "-c", conf, "-e", errLog)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its workers are stopped with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // fast shutdown: open streams are closed
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range []string{httpsPort, httpPort} {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				log, _ := os.ReadFile(errLog)
				t.Fatalf("nginx exited before listening:\n%s\n%s", out.String(), log)
			default:
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(errLog)
				t.Fatalf("nginx did not listen on %s:\n%s\n%s", port, out.String(), log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &proxy{
		base:   "https://127.0.0.1:" + httpsPort,
		plain:  "http://127.0.0.1:" + httpPort,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		errLog: errLog,
	}
}

// call sends a JSON request through the proxy and decodes a JSON answer
// into out (when not nil); it returns the status.
func (p *proxy) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// session creates a session through the proxy under prefix.
func (p *proxy) session(t *testing.T, prefix, owner string) string {
	t.Helper()
	var s struct {
		SessionID string `json:"session_id"`
	}
	if st := p.call(t, "POST", prefix+"/v1/sessions", map[string]any{"owner_id": owner, "ttl_ms": 120000}, &s); st != 201 {
		t.Fatalf("create session through nginx: %d", st)
	}
	return s.SessionID
}

// sseItem is one event of a stream, or one comment line (event "").
type sseItem struct {
	event, data, comment string
	at                   time.Time
}

// readSSE sends the events and comments of body to the returned channel,
// which is closed when the stream ends.
func readSSE(body io.Reader) <-chan sseItem {
	ch := make(chan sseItem, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != "" || data != "" {
					ch <- sseItem{event: ev, data: data, at: time.Now()}
				}
				ev, data = "", ""
			case strings.HasPrefix(line, ":"):
				ch <- sseItem{comment: strings.TrimSpace(line[1:]), at: time.Now()}
			case strings.HasPrefix(line, "event:"):
				ev = strings.TrimSpace(line[len("event:"):])
			case strings.HasPrefix(line, "data:"):
				data += strings.TrimPrefix(line[len("data:"):], " ")
			}
		}
	}()
	return ch
}

// openWatch opens a watch stream on selector through the proxy under prefix.
func (p *proxy) openWatch(t *testing.T, prefix, selector string) <-chan sseItem {
	t.Helper()
	req, err := http.NewRequest("GET", p.base+prefix+"/v1/leases/watch?selector="+url.QueryEscape(selector), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("watch through nginx: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readSSE(resp.Body)
}

// next waits for the next item of a stream.
func next(t *testing.T, ch <-chan sseItem, within time.Duration, what string) sseItem {
	t.Helper()
	select {
	case it, ok := <-ch:
		if !ok {
			t.Fatalf("the stream ended while waiting for %s", what)
		}
		return it
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
	}
	return sseItem{}
}

func TestNginxRecipe(t *testing.T) {
	bin := nginxBinary(t)
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	t.Logf("%s", bytes.TrimSpace(out))
	broker := startBroker(t)
	p := startNginx(t, bin, broker, nil)
	short := startNginx(t, bin, broker, map[string]string{"proxy_read_timeout 75s;": "proxy_read_timeout 3s;"})

	// The checks run at once, each in its own goroutine rather than with
	// t.Parallel, so that -parallel (GOMAXPROCS) never queues the waits.
	checks := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"watch", func(t *testing.T) { testWatch(t, p, "") }},
		{"watch-under-sub-path", func(t *testing.T) { testWatch(t, p, subPath) }},
		{"long-poll", func(t *testing.T) { testLongPoll(t, p) }},
		{"read-timeout-matters", func(t *testing.T) { testShortReadTimeout(t, short) }},
		{"pages-under-sub-path", func(t *testing.T) { testPages(t, p) }},
		{"large-body", func(t *testing.T) { testLargeBody(t, p) }},
		{"http-redirects-to-https", func(t *testing.T) {
			resp, err := p.client.Get(p.plain + "/ui/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if loc := resp.Header.Get("Location"); resp.StatusCode != 301 || !strings.HasPrefix(loc, "https://") {
				t.Fatalf("plain HTTP: %d Location %q, want 301 to https://", resp.StatusCode, loc)
			}
		}},
	}
	var wg sync.WaitGroup
	for _, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(c.name, c.run)
		}()
	}
	wg.Wait()
	if t.Failed() {
		if log, err := os.ReadFile(p.errLog); err == nil {
			t.Logf("nginx error.log:\n%s", log)
		}
	}
}

// testWatch: the snapshot marker first, a change made through nginx within
// 1 s, then the broker's heartbeat 15 s after it, on a stream through nginx.
func testWatch(t *testing.T, p *proxy, prefix string) {
	area := "wroot"
	if prefix != "" {
		area = "wsub"
	}
	stream := p.openWatch(t, prefix, "lease://acme/"+area+"/*")
	first := next(t, stream, 5*time.Second, "snapshot marker")
	if first.event != "snapshot" {
		t.Fatalf("first item of the stream: %+v, want event snapshot", first)
	}
	sid := p.session(t, prefix, "proxy-watch")
	sent := time.Now()
	var lease struct {
		FencingToken json.RawMessage `json:"fencing_token"`
	}
	if st := p.call(t, "POST", prefix+"/v1/leases/acme/"+area+"/r1/acquire", map[string]any{"session_id": sid, "ttl_ms": 120000}, &lease); st != 200 {
		t.Fatalf("acquire through nginx: %d", st)
	}
	change := next(t, stream, time.Second, "change event within 1 s of the acquire")
	if change.event != "change" || !strings.Contains(change.data, `"kind":"acquired"`) || !strings.Contains(change.data, "lease://acme/"+area+"/r1") {
		t.Fatalf("after the acquire: %+v, want its change event", change)
	}
	t.Logf("%s: change arrived %v after the acquire was sent", prefix+"/v1/leases/watch", change.at.Sub(sent).Round(time.Millisecond))
	hb := next(t, stream, heartbeat+5*time.Second, "heartbeat")
	if hb.event != "" || hb.comment != "keepalive" {
		t.Fatalf("after the change: %+v, want the ': keepalive' heartbeat", hb)
	}
	idle := hb.at.Sub(change.at)
	if idle < heartbeat-time.Second {
		t.Fatalf("heartbeat %v after the change, want about %v", idle, heartbeat)
	}
	t.Logf("%s: heartbeat passed %v after the change", prefix+"/v1/leases/watch", idle.Round(time.Millisecond))
}

// testLongPoll: a waiter queued 25 s behind a holder that releases then is
// granted through nginx.
func testLongPoll(t *testing.T, p *proxy) {
	holder, waiter := p.session(t, "", "proxy-holder"), p.session(t, "", "proxy-waiter")
	const path = "/v1/leases/acme/longpoll/r1"
	var held struct {
		FencingToken json.RawMessage `json:"fencing_token"`
	}
	if st := p.call(t, "POST", path+"/acquire", map[string]any{"session_id": holder, "ttl_ms": 120000}, &held); st != 200 {
		t.Fatalf("holder's acquire: %d", st)
	}
	start := time.Now()
	released := make(chan string, 1)
	release := time.AfterFunc(longPoll, func() {
		b, _ := json.Marshal(map[string]any{"session_id": holder, "fencing_token": held.FencingToken})
		resp, err := p.client.Post(p.base+path+"/release", "application/json", bytes.NewReader(b))
		if err != nil {
			released <- err.Error()
			return
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			released <- ""
		} else {
			released <- resp.Status
		}
	})
	defer release.Stop()
	var got struct {
		Outcome string `json:"outcome"`
	}
	st := p.call(t, "POST", path+"/acquire", map[string]any{"session_id": waiter, "ttl_ms": 120000, "wait_ms": 30000}, &got)
	waited := time.Since(start)
	select {
	case r := <-released:
		if r != "" {
			t.Fatalf("holder's release through nginx: %s", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the holder's release through nginx did not answer (the waiter answered %d after %v)", st, waited)
	}
	if st != 200 || got.Outcome != "acquired" {
		t.Fatalf("waiter's acquire through nginx after %v: %d %q, want 200 acquired", waited, st, got.Outcome)
	}
	if waited < longPoll || waited > longPoll+3*time.Second {
		t.Fatalf("waiter granted after %v, want just after the release at %v", waited, longPoll)
	}
	t.Logf("waiter granted through nginx after %v", waited.Round(time.Millisecond))
}

// testShortReadTimeout: the recipe with proxy_read_timeout 3s answers a long
// poll with 504 and cuts an idle stream before its heartbeat, so the 75 s
// is what carries the checks above.
func testShortReadTimeout(t *testing.T, p *proxy) {
	holder, waiter := p.session(t, "", "short-holder"), p.session(t, "", "short-waiter")
	const path = "/v1/leases/acme/short/r1"
	if st := p.call(t, "POST", path+"/acquire", map[string]any{"session_id": holder, "ttl_ms": 120000}, nil); st != 200 {
		t.Fatalf("holder's acquire: %d", st)
	}
	done := make(chan string, 1)
	stream := p.openWatch(t, "", "lease://acme/shortwatch/*")
	go func() {
		start := time.Now()
		for it := range stream {
			if it.comment == "keepalive" {
				done <- "a heartbeat came through"
				return
			}
		}
		done <- fmt.Sprintf("cut after %v", time.Since(start).Round(100*time.Millisecond))
	}()
	start := time.Now()
	st := p.call(t, "POST", path+"/acquire", map[string]any{"session_id": waiter, "ttl_ms": 120000, "wait_ms": 10000}, nil)
	if waited := time.Since(start); st != http.StatusGatewayTimeout || waited > 6*time.Second {
		t.Fatalf("long poll through nginx with proxy_read_timeout 3s: %d after %v, want 504 after about 3 s", st, waited)
	}
	select {
	case s := <-done:
		if !strings.HasPrefix(s, "cut") {
			t.Fatalf("watch stream with proxy_read_timeout 3s: %s, want it cut", s)
		}
		t.Logf("with proxy_read_timeout 3s: long poll 504, watch stream %s", s)
	case <-time.After(heartbeat + 5*time.Second):
		t.Fatal("the watch stream through nginx with proxy_read_timeout 3s was neither cut nor beat")
	}
}

var refs = regexp.MustCompile(`(?:src|href|data-spec-url)="([^"]+)"`)

// testPages: /muster/ui and /muster/docs redirect under the prefix; the
// pages, every file they reference, the contract and the dashboard's API
// root all answer 200 under /muster/.
func testPages(t *testing.T, p *proxy) {
	get := func(u string) (*http.Response, []byte) {
		t.Helper()
		resp, err := p.client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, page := range []string{"/ui", "/docs"} {
		bare := p.base + subPath + page
		resp, _ := get(bare)
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != 301 || err != nil {
			t.Fatalf("%s: %d Location %q, want 301", bare, resp.StatusCode, resp.Header.Get("Location"))
		}
		pageURL, _ := url.Parse(bare)
		if got := pageURL.ResolveReference(loc).String(); got != bare+"/" {
			t.Fatalf("%s redirects to %s, want %s/", bare, got, bare)
		}

		resp, body := get(bare + "/")
		if resp.StatusCode != 200 {
			t.Fatalf("%s/: %d", bare, resp.StatusCode)
		}
		base, _ := url.Parse(bare + "/")
		matches := refs.FindAllStringSubmatch(string(body), -1)
		if len(matches) < 3 {
			t.Fatalf("%s/ references %d URLs: %s", bare, len(matches), body)
		}
		for _, m := range matches {
			ref, err := url.Parse(m[1])
			if err != nil || ref.IsAbs() || strings.HasPrefix(m[1], "/") {
				t.Errorf("%s/ references %q: want a URL relative to the page", bare, m[1])
				continue
			}
			u := base.ResolveReference(ref)
			if !strings.HasPrefix(u.Path, subPath+"/") {
				t.Errorf("%s/ references %q, which leaves %s/: %s", bare, m[1], subPath, u)
				continue
			}
			resp, b := get(u.String())
			if resp.StatusCode != 200 {
				t.Errorf("%s (%q from %s/): %d", u, m[1], bare, resp.StatusCode)
			}
			if strings.HasSuffix(u.Path, "/openapi.yaml") && !bytes.HasPrefix(b, []byte("openapi:")) {
				t.Errorf("%s is not the contract: %.40q", u, b)
			}
			t.Logf("%s/ -> %s: %d", subPath+page, u.Path, resp.StatusCode)
		}
		if page == "/docs" && !strings.Contains(string(body), `data-spec-url="../openapi.yaml"`) {
			t.Errorf("%s/ does not load ../openapi.yaml", bare)
		}
	}
	// The dashboard calls the API at new URL("..", location.href): the
	// parent of /muster/ui/, which must be the broker.
	resp, app := get(p.base + subPath + "/ui/app.js")
	if resp.StatusCode != 200 || !bytes.Contains(app, []byte(`new URL("..", location.href)`)) || bytes.Contains(app, []byte("location.origin")) {
		t.Fatalf("%s/ui/app.js does not take the API root from the page's URL", subPath)
	}
	if resp, _ := get(p.base + subPath + "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("%s/healthz (the dashboard's API root): %d", subPath, resp.StatusCode)
	}
}

// testLargeBody: a 2 MB fleet plan passes nginx and is answered by the
// broker.
func testLargeBody(t *testing.T, p *proxy) {
	name := strings.Repeat("n", 250)
	desired := make([]string, 8000)
	for i := range desired {
		desired[i] = fmt.Sprintf("%s%06d", name, i)
	}
	body, _ := json.Marshal(map[string]any{"desired": desired, "live": []string{}})
	if len(body) < 2_000_000 || len(body) > 2<<20 {
		t.Fatalf("plan body of %d bytes", len(body))
	}
	resp, err := p.client.Post(p.base+subPath+"/v1/fleets/plan", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Missing []string `json:"missing"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); resp.StatusCode != 200 || err != nil || len(out.Missing) != len(desired) {
		t.Fatalf("a %d-byte plan through nginx: %d (%v), %d missing", len(body), resp.StatusCode, err, len(out.Missing))
	}
	t.Logf("a %d-byte plan through nginx: 200", len(body))
}

// TestCaddyfile validates deploy/proxy/Caddyfile with caddy when a caddy
// binary is present; Debian has none, so CI does not exercise it.
func TestCaddyfile(t *testing.T) {
	bin, err := exec.LookPath("caddy")
	if errors.Is(err, exec.ErrNotFound) {
		t.Skip("no caddy binary: deploy/proxy/Caddyfile is not exercised (docs/operations.md says so)")
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "validate", "--adapter", "caddyfile", "--config", "../../deploy/proxy/Caddyfile").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
}
