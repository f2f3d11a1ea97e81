// Package placement tests multi-broker mode (docs/placement.md) with real
// broker processes: several `muster serve` on loopback sharing one
// PostgreSQL, each through a TCP proxy the test can cut.
package placement

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/cutproxy"
	"github.com/musterhq/muster/tests/leasemodel"
	"github.com/musterhq/muster/tests/musterbin"
	"github.com/musterhq/muster/tests/pgtest"
)

// Timing of the test clusters: short, within the documented safe ranges.
const (
	claimTTL   = 2 * time.Second
	renewEvery = 500 * time.Millisecond
	margin     = 500 * time.Millisecond
)

// timing is a cluster's placement timing.
type timing struct{ ttl, every, margin time.Duration }

var (
	short    = timing{claimTTL, renewEvery, margin}
	defaults = timing{6 * time.Second, 2 * time.Second, time.Second} // the broker's defaults
)

// secret is family's bearer token in every test cluster.
func secret(family string) string { return "token-of-" + family }

// broker is one muster process of a cluster.
type broker struct {
	id    string
	url   string
	port  int // the port it was started on (restart keeps it)
	proxy *cutproxy.Proxy
	cmd   *exec.Cmd
	exit  chan error
	log   *bytes.Buffer
}

// cluster is n brokers serving families, sharing one PostgreSQL schema.
type cluster struct {
	t        *testing.T
	timing   timing
	families []string
	brokers  []*broker
	store    string
	bin      string
	dir      string
}

func newCluster(t *testing.T, n int, families ...string) *cluster {
	t.Helper()
	return newClusterOn(t, pgtest.Schema(t, "placement"), n, families...)
}

// newClusterTimed is newCluster with the given timing.
func newClusterTimed(t *testing.T, tm timing, n int, families ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, timing: tm, families: families, store: pgtest.Schema(t, "placement"), bin: musterbin.Path(t), dir: t.TempDir()}
	for i := range n {
		c.start(fmt.Sprintf("b%d", i+1))
	}
	return c
}

// newClusterOn is newCluster on the PostgreSQL database at store.
func newClusterOn(t *testing.T, store string, n int, families ...string) *cluster {
	t.Helper()
	return newClusterOnTimed(t, store, short, n, families...)
}

// newClusterOnTimed is newClusterOn with the given timing.
func newClusterOnTimed(t *testing.T, store string, tm timing, n int, families ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, timing: tm, families: families, store: store, bin: musterbin.Path(t), dir: t.TempDir()}
	for i := range n {
		c.start(fmt.Sprintf("b%d", i+1))
	}
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start starts broker id (its own data dir, its own proxy to PostgreSQL).
func (c *cluster) start(id string) *broker {
	c.t.Helper()
	return c.startOn(id, 0)
}

// restart starts b's broker id again on b's port, as a restarted process
// of a deployment whose addresses stay.
func (c *cluster) restart(b *broker) *broker {
	c.t.Helper()
	return c.startOn(b.id, b.port)
}

// startOn starts broker id on port (0: a free one).
func (c *cluster) startOn(id string, port int) *broker {
	t := c.t
	t.Helper()
	su, err := url.Parse(c.store)
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{id: id, port: port, proxy: cutproxy.Start(t, su.Host), exit: make(chan error, 1), log: &bytes.Buffer{}}
	viaProxy := *su
	viaProxy.Host = b.proxy.Addr()
	q := viaProxy.Query()
	q.Set("connect_timeout", "3")
	viaProxy.RawQuery = q.Encode()
	dir := filepath.Join(c.dir, id)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// A free port can be taken by another process before the broker binds
	// it, and a loaded machine can slow the first connection: try again.
	var failures []string
	for attempt := 0; ; attempt++ {
		if c.launch(b, dir, viaProxy.String()) {
			u, _ := url.Parse(b.url)
			b.port, _ = strconv.Atoi(u.Port())
			break
		}
		failures = append(failures, b.log.String())
		if attempt == 2 {
			t.Fatalf("broker %s did not start in 3 attempts:\n%s", id, strings.Join(failures, "\n---\n"))
		}
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		<-b.exit
		b.exit <- nil
		if t.Failed() {
			t.Logf("broker %s log:\n%s", id, b.log)
		}
	})
	c.brokers = append(c.brokers, b)
	return b
}

// launch starts b's process on a fresh port with its configuration, and
// reports whether it came up; when not, the process has exited and b.log
// holds what it said.
func (c *cluster) launch(b *broker, dir, store string) bool {
	t := c.t
	t.Helper()
	port := b.port
	if port == 0 {
		port = freePort(t)
	}
	b.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	b.log = &bytes.Buffer{}
	b.exit = make(chan error, 1)
	var cfg strings.Builder
	cfg.WriteString("tokens:\n")
	for _, fam := range c.families {
		h := sha256.Sum256([]byte(secret(fam)))
		fmt.Fprintf(&cfg, "  - {name: %s, sha256: %s, family: %s, grants: [\"lease://**#*\", \"fleet://**#*\"]}\n", fam, hex.EncodeToString(h[:]), fam)
	}
	fmt.Fprintf(&cfg, "placement:\n  broker: %s\n  advertise: %s\n  claim_ttl: %v\n  renew_every: %v\n  margin: %v\n",
		b.id, b.url, c.timing.ttl, c.timing.every, c.timing.margin)
	cfgPath := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	b.cmd = exec.Command(c.bin, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", filepath.Join(dir, "data"),
		"--config", cfgPath, "--store", store)
	b.cmd.Stderr = b.log
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "muster is serving") {
				ready <- true
				sent = true
			}
		}
		if !sent {
			ready <- false
		}
		b.exit <- b.cmd.Wait()
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-b.exit
		}
		return ok
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exit
		return false
	}
}

// kill9 kills b at once (SIGKILL), as a crash.
func (b *broker) kill9(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-b.exit
	b.exit <- err
}

// term stops b gracefully (SIGTERM) and waits for it.
func (b *broker) term(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.exit:
		b.exit <- err
		if err != nil {
			t.Fatalf("broker %s exit after SIGTERM: %v", b.id, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("broker %s did not stop after SIGTERM", b.id)
	}
}

// answer is one HTTP answer, decoded.
type answer struct {
	status int
	body   map[string]any
	header http.Header
}

var client = &http.Client{Timeout: 5 * time.Second}

// call sends one JSON request as family's token.
func call(base, family, method, path string, body any) (answer, error) {
	return callOn(client, base, family, method, path, body)
}

// callOn is call with the HTTP client hc.
func callOn(hc *http.Client, base, family, method, path string, body any) (answer, error) {
	req, err := leasemodel.Request(method, base+path, secret(family), body)
	if err != nil {
		return answer{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		_ = json.Unmarshal(data, &a.body)
	}
	return a, nil
}

func (a answer) code() string { s, _ := a.body["code"].(string); return s }

// newSession creates a session of family on base.
func newSession(base, family string) (string, answer, error) {
	return newSessionAs(base, family, "w")
}

// newSessionAs creates a session of family on base with the owner id owner.
func newSessionAs(base, family, owner string) (string, answer, error) {
	a, err := call(base, family, "POST", "/v1/sessions", map[string]any{"owner_id": owner, "ttl_ms": 60000})
	if err != nil || a.status != 201 {
		return "", a, err
	}
	id, _ := a.body["session_id"].(string)
	return id, a, nil
}

// acquire acquires lease://r/a/<res> for session on base; the token is 0
// when not granted.
func acquire(base, family, session, res string) (uint64, answer, error) {
	a, err := call(base, family, "POST", "/v1/leases/r/a/"+res+"/acquire", map[string]any{"session_id": session, "ttl_ms": 30000, "wait_ms": 0})
	if err != nil || a.status != 200 {
		return 0, a, err
	}
	tok, _ := a.body["fencing_token"].(float64)
	return uint64(tok), a, nil
}

// owner finds the broker that serves family now: the one broker whose
// session create succeeds, checking that every other live broker answers
// wrong_broker naming it (or family_unavailable while claims settle). It
// returns nil until that holds.
func (c *cluster) owner(family string, live []*broker) *broker {
	var owner *broker
	answers := map[*broker]answer{}
	for _, b := range live {
		_, a, err := newSession(b.url, family)
		if err != nil {
			return nil
		}
		answers[b] = a
		if a.status == 201 {
			if owner != nil {
				c.t.Fatalf("family %s served by %s and %s at once", family, owner.id, b.id)
			}
			owner = b
		}
	}
	if owner == nil {
		return nil
	}
	for b, a := range answers {
		if b == owner {
			continue
		}
		if a.status != 421 || a.code() != "wrong_broker" || a.body["owner"] != owner.url {
			return nil
		}
	}
	return owner
}

// waitOwner polls owner until every family has one, or fails after d.
func (c *cluster) waitOwner(family string, live []*broker, d time.Duration) *broker {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if o := c.owner(family, live); o != nil {
			return o
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("family %s has no settled owner among %d brokers after %v", family, len(live), d)
	return nil
}

// waitSettled is waitOwner once planned moves are over: the same owner
// twice, two renewal periods apart (a broker that just started moves
// families to itself on its first rounds).
func (c *cluster) waitSettled(family string, live []*broker, d time.Duration) *broker {
	c.t.Helper()
	deadline := time.Now().Add(d)
	prev := c.waitOwner(family, live, d)
	for time.Now().Before(deadline) {
		time.Sleep(2 * c.timing.every)
		o := c.waitOwner(family, live, time.Until(deadline))
		if o == prev {
			return o
		}
		prev = o
	}
	c.t.Fatalf("family %s did not settle on one owner within %v", family, d)
	return nil
}

func without(bs []*broker, gone *broker) []*broker {
	var out []*broker
	for _, b := range bs {
		if b != gone {
			out = append(out, b)
		}
	}
	return out
}

// holdJob makes a session on b, the owner of acme, and acquires
// lease://r/a/job with it.
func holdJob(t *testing.T, b *broker) (session string, token uint64) {
	t.Helper()
	session, a, err := newSession(b.url, "acme")
	if err != nil || session == "" {
		t.Fatalf("session: %d %v", a.status, err)
	}
	token, a, err = acquire(b.url, "acme", session, "job")
	if err != nil || token == 0 {
		t.Fatalf("acquire: %d %v", a.status, err)
	}
	return session, token
}
