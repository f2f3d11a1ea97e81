package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

var brokerBin, workerBin string // binaries built by TestMain

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rebalancer-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin, workerBin = filepath.Join(dir, "muster"), filepath.Join(dir, "rebalancer")
	for _, b := range []struct{ out, dir, pkg string }{
		{brokerBin, "../../../..", "./cmd/muster"},
		{workerBin, ".", "."},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// startBroker runs a dev-mode broker and returns its base URL.
func startBroker(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(brokerBin, "serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir())
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "muster serving" {
				addr <- l.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not start")
		return ""
	}
}

// holders maps each owner to how many renders leases it holds.
func holders(t *testing.T, c *muster.Client) (map[string]int, int) {
	t.Helper()
	out, n := map[string]int{}, 0
	for it, err := range c.List(context.Background(), "lease://acme/renders/*", muster.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out[it.OwnerID]++
		n++
	}
	return out, n
}

func waitHolders(t *testing.T, c *muster.Client, within time.Duration, ok func(map[string]int, int) bool) (map[string]int, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		h, n := holders(t, c)
		if ok(h, n) {
			return h, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("after %v: %d held, %v", within, n, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three workers share nine specs three each; killing one (SIGKILL: no
// goodbye, its leases just stop being renewed) hands its three specs to the
// other two within twice the lease TTL.
func TestRebalancerHandsOverAKilledWorkersWork(t *testing.T) {
	const ttl = 2 * time.Second
	url := startBroker(t)
	c, err := muster.New(url)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Fleet("renders")
	for i := range 9 {
		if _, err := f.Register(context.Background(), "doc", map[string]int{"page": i}); err != nil {
			t.Fatal(err)
		}
	}
	procs := map[string]*exec.Cmd{}
	for _, id := range []string{"w1", "w2", "w3"} {
		cmd := exec.Command(workerBin, "--broker", url, "--root", "renders", "--id", id, "--ttl", ttl.String())
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs[id] = cmd
	}
	balanced := func(h map[string]int, n int) bool {
		return n == 9 && h["w1"] == 3 && h["w2"] == 3 && h["w3"] == 3
	}
	_, d := waitHolders(t, c, 15*time.Second, balanced)
	t.Logf("three workers balanced 3/3/3 after %v", d)

	if err := procs["w2"].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = procs["w2"].Wait()
	h, d := waitHolders(t, c, 2*ttl, func(h map[string]int, n int) bool {
		return n == 9 && h["w2"] == 0
	})
	t.Logf("w2's work handed over after %v (lease TTL %v): %v", d, ttl, h)
	if h["w1"]+h["w3"] != 9 || h["w1"] < 4 || h["w3"] < 4 {
		t.Fatalf("not shared fairly: %v", h)
	}

	// A graceful stop (SIGTERM) releases at once: the survivor takes all.
	if err := procs["w3"].Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := procs["w3"].Wait(); err != nil {
		t.Fatalf("w3 after SIGTERM: %v", err)
	}
	_, d = waitHolders(t, c, ttl, func(h map[string]int, n int) bool { return n == 9 && h["w1"] == 9 })
	t.Logf("w3's work handed over after a graceful stop in %v", d)
}
