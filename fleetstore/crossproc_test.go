package fleetstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

// The cross-process tests re-execute this test binary; TestMain turns it into
// a child when envChild names a role. The child opens the store with
// Open(envChildDataDir, envChildStoreURL), so an empty URL is bbolt.
const (
	envChild         = "MUSTER_FLEETSTORE_CHILD"
	envChildDataDir  = "MUSTER_FLEETSTORE_CHILD_DATA_DIR"
	envChildStoreURL = "MUSTER_FLEETSTORE_CHILD_STORE_URL"
	envChildCount    = "MUSTER_FLEETSTORE_CHILD_COUNT"

	childRoot = "crossproc"
	// exitUnavailable is the child's exit status when opening the store
	// failed with CodeUnavailable.
	exitUnavailable = 3
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envChild); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// childSpec is the spec a child registers as its i-th: unique, and about a
// kilobyte so a commit spans more than a trivial write.
func childSpec(pid, i int) string {
	return fmt.Sprintf(`{"pid":%d,"i":%d,"pad":"%s"}`, pid, i, strings.Repeat("p", 1000))
}

// runChild is a child process. Its stdout carries only its protocol lines.
func runChild(role string) int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(envChildDataDir), os.Getenv(envChildStoreURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		if muster.ErrorCode(err) == muster.CodeUnavailable {
			return exitUnavailable
		}
		return 1
	}
	f := New(s)
	defer func() { _ = f.Close() }()
	switch role {
	case "open":
		fmt.Println("opened")
		return 0

	case "register-until-killed":
		// Print each name as soon as its Register returned: the moment a
		// broker would send 201. The parent kills us at some such moment.
		for i := 0; ; i++ {
			name, err := f.Register(ctx, fam, childRoot, "k", []byte(childSpec(os.Getpid(), i)))
			if err != nil {
				fmt.Fprintln(os.Stderr, "child: register:", err)
				return 1
			}
			fmt.Printf("%s %d %d\n", name, os.Getpid(), i)
		}

	case "register-n":
		n, _ := strconv.Atoi(os.Getenv(envChildCount))
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fmt.Fprintln(os.Stderr, "child: waiting for go:", err)
			return 1
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		failed := false
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < n; i += 8 {
					name, err := f.Register(ctx, fam, childRoot, "k", []byte(childSpec(os.Getpid(), i)))
					mu.Lock()
					if err != nil {
						fmt.Fprintln(os.Stderr, "child: register:", err)
						failed = true
					} else {
						fmt.Println(name)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed {
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "child: unknown role", role)
	return 2
}

// childCmd prepares a child with role on the given store.
func childCmd(tb testing.TB, ctx context.Context, role, dataDir, storeURL string, extraEnv ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envChild+"="+role, envChildDataDir+"="+dataDir, envChildStoreURL+"="+storeURL)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = &testWriter{tb: tb}
	return cmd
}

// testWriter sends a child's stderr to the test log.
type testWriter struct {
	tb testing.TB
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.tb.Logf("child stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// crossBackends are the stores a child can open: a bbolt data directory, or a
// fresh PostgreSQL schema.
var crossBackends = []struct {
	name string
	new  func(tb testing.TB) (dataDir, storeURL string)
}{
	{"bolt", func(tb testing.TB) (string, string) { return tb.TempDir(), "" }},
	{"postgres", func(tb testing.TB) (string, string) { return "", MustPostgresSchema(tb) }},
}

func openCross(tb testing.TB, dataDir, storeURL string) *Fleet {
	tb.Helper()
	s, err := Open(context.Background(), dataDir, storeURL)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return New(s)
}

// TestKill9AfterReply: a child registers in a loop and prints each name once
// Register returned; the parent kill -9s it right after reading a name, then
// reopens the store and finds every spec whose name it read.
func TestKill9AfterReply(t *testing.T) {
	for _, b := range crossBackends {
		t.Run(b.name, func(t *testing.T) {
			dataDir, storeURL := b.new(t)
			seen := map[string]string{} // name → spec
			for round := range 4 {
				killAfter := 1 + rand.IntN(40)
				for name, spec := range killChildAfter(t, dataDir, storeURL, killAfter) {
					seen[name] = spec
				}
				t.Logf("round %d: killed after %d acknowledged registers", round, killAfter)
			}
			f := openCross(t, dataDir, storeURL)
			for name, spec := range seen {
				row, err := f.Get(ctx, fam, childRoot, name)
				if err != nil {
					t.Errorf("%s was acknowledged before kill -9 but is lost: %v", name, err)
					continue
				}
				if string(row.Spec) != spec {
					t.Errorf("%s = %.60s…, want %.60s…", name, row.Spec, spec)
				}
			}
			next := mustRegister(t, f, fam, childRoot, "k", `{}`)
			if _, dup := seen[next]; dup {
				t.Errorf("after kill -9, Register minted %s again", next)
			}
		})
	}
}

// killChildAfter runs one register-until-killed child, SIGKILLs it right
// after reading its n-th acknowledged name, and returns the names it read.
func killChildAfter(t *testing.T, dataDir, storeURL string, n int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := childCmd(t, ctx, "register-until-killed", dataDir, storeURL)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	got := map[string]string{}
	sc := bufio.NewScanner(out)
	for len(got) < n && sc.Scan() {
		var name string
		var pid, i int
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &name, &pid, &i); err != nil {
			t.Fatalf("child said %q: %v", sc.Text(), err)
		}
		got[name] = childSpec(pid, i)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	err = cmd.Wait()
	if len(got) < n {
		t.Fatalf("child stopped after %d of %d names: %v", len(got), n, err)
	}
	return got
}

// TestTwoProcessesRegisterOnPostgres: two broker processes register at once on
// one PostgreSQL database, same family and root; no name is minted twice.
func TestTwoProcessesRegisterOnPostgres(t *testing.T) {
	storeURL := MustPostgresSchema(t)
	const perChild = 150
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type child struct {
		cmd   *exec.Cmd
		in    io.WriteCloser
		out   *bufio.Scanner
		names []string
	}
	children := make([]*child, 2)
	for i := range children {
		cmd := childCmd(t, ctx, "register-n", "", storeURL, envChildCount+"="+strconv.Itoa(perChild))
		in, err := cmd.StdinPipe()
		must(t, err)
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		if !c.out.Scan() || c.out.Text() != "ready" {
			t.Fatalf("child %d did not get ready: %q", i, c.out.Text())
		}
		children[i] = c
	}
	for _, c := range children { // both connected and migrated: start together
		_, err := io.WriteString(c.in, "go\n")
		must(t, err)
	}
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() {
			for c.out.Scan() {
				c.names = append(c.names, c.out.Text())
			}
		})
	}
	wg.Wait()
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if len(c.names) != perChild {
			t.Fatalf("child %d reported %d names, want %d", i, len(c.names), perChild)
		}
	}
	all := slices.Concat(children[0].names, children[1].names)
	slices.Sort(all)
	if d := slices.Compact(slices.Clone(all)); len(d) != len(all) {
		t.Fatalf("two processes minted %d duplicate names", len(all)-len(d))
	}
	want := make([]string, 2*perChild)
	for i := range want {
		want[i] = "k-" + strconv.Itoa(i+1)
	}
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("names minted = %v…, want k-1 … k-%d", all[:5], 2*perChild)
	}
	f := openCross(t, "", storeURL)
	if got := names(listAll(t, f, fam, childRoot, 0)); !slices.Equal(got, want) {
		t.Fatalf("Desired lists %d names, want the %d minted", len(got), len(want))
	}
}

// TestBoltSecondProcessCannotOpen: while one process holds the bbolt file, a
// second broker process fails to open it (CodeUnavailable) instead of
// blocking.
func TestBoltSecondProcessCannotOpen(t *testing.T) {
	dir := t.TempDir()
	_ = MustOpenBoltAt(t, filepath.Join(dir, BoltFileName))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	out, err := childCmd(t, ctx, "open", dir, "").Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUnavailable {
		t.Fatalf("second process: %v, output %q; want exit status %d (unavailable)", err, out, exitUnavailable)
	}
	if d := time.Since(start); d > DefaultBoltTimeout+20*time.Second {
		t.Fatalf("second process took %v to give up", d)
	}
}
