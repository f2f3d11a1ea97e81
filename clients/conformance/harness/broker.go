package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tokenSpec is one configured token of the conformance broker.
type tokenSpec struct {
	Secret string
	Family string
	Grants []string
}

// tokens is the conformance token table (also in the README): two
// families, and a narrow reader of one area.
var tokens = map[string]tokenSpec{
	"a":      {"secret-a", "fam-a", []string{"lease://**#*", "fleet://**#*"}},
	"b":      {"secret-b", "fam-b", []string{"lease://**#*", "fleet://**#*"}},
	"narrow": {"secret-narrow", "fam-a", []string{"lease://acme/renderers/*#read"}},
}

// broker supervises the real `muster serve` on one loopback address. Its
// methods are not safe for concurrent use; the control server serializes
// them.
type broker struct {
	bin    string
	dir    string // holds the configs and the data dirs
	name   string // "b1", "b2", …: names its data dirs and log lines
	config string
	store  string // --store (a placed deployment's PostgreSQL), "" for none
	addr   string
	logs   io.Writer // the broker's stderr is copied here, when not nil
	runs   int       // data dirs created so far

	mu   sync.Mutex
	cmd  *exec.Cmd
	tail []string
}

// newBroker writes the token config into a new temp dir and starts the
// broker on a free loopback port with an empty data dir.
func newBroker(bin string, logs io.Writer) (*broker, error) {
	dir, err := os.MkdirTemp("", "muster-conformance-")
	if err != nil {
		return nil, err
	}
	b := &broker{bin: bin, dir: dir, name: "b1", logs: logs}
	b.config = b.plainConfig()
	if err := os.WriteFile(b.config, []byte(tokenConfig()), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := b.start("127.0.0.1:0"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

// tokenConfig is the broker's config file for the token table.
func tokenConfig() string {
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString("tokens:\n")
	for _, name := range names {
		t := tokens[name]
		sum := sha256.Sum256([]byte(t.Secret))
		fmt.Fprintf(&sb, "  - name: %s\n    sha256: %s\n    family: %s\n    grants:\n", name, hex.EncodeToString(sum[:]), t.Family)
		for _, g := range t.Grants {
			fmt.Fprintf(&sb, "      - %q\n", g)
		}
	}
	return sb.String()
}

// plainConfig is the config file of the single, unplaced broker.
func (b *broker) plainConfig() string { return filepath.Join(b.dir, "muster.yaml") }

func (b *broker) url() string { return "http://" + b.addr }

func (b *broker) dataDir() string {
	return filepath.Join(b.dir, fmt.Sprintf("%s-data-%d", b.name, b.runs))
}

// start runs `muster serve` on addr with the current data dir and waits for
// its serving line.
func (b *broker) start(addr string) error {
	args := []string{"serve", "--addr", addr, "--data-dir", b.dataDir(), "--config", b.config}
	if b.store != "" {
		args = append(args, "--store", b.store)
	}
	cmd := exec.Command(b.bin, args...)
	cmd.SysProcAttr = childAttr()
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
			b.tail = append(b.tail[max(0, len(b.tail)-49):], sc.Text())
			b.mu.Unlock()
			if b.logs != nil {
				fmt.Fprintf(b.logs, "broker %s: %s\n", b.name, sc.Bytes())
			}
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

// logTail is the broker's last log lines.
func (b *broker) logTail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.tail[max(0, len(b.tail)-5):], "\n")
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
func (b *broker) restart() error {
	b.kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := b.start(b.addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("restart: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reset kills the broker and starts a new one on the same address with a
// new, empty data dir (the previous one is removed), the given config file
// and store.
func (b *broker) reset(config, store string) error {
	b.kill()
	_ = os.RemoveAll(b.dataDir())
	b.runs++
	b.config, b.store = config, store
	return b.restart()
}

// close kills the broker and removes its config and data.
func (b *broker) close() {
	b.kill()
	_ = os.RemoveAll(b.dir)
}
