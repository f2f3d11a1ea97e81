package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/tests/pgtest"
)

// startBroker runs a dev-mode broker on dataDir (bbolt unless storeURL).
func startBroker(tb testing.TB, dataDir, storeURL string) *app.Main {
	tb.Helper()
	m := app.NewMain()
	m.Addr, m.DataDir, m.StoreURL = "127.0.0.1:0", dataDir, storeURL
	m.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	if err := m.Open(); err != nil {
		tb.Fatalf("start broker: %v", err)
	}
	tb.Cleanup(func() {
		if !stopped.Load(m) {
			stopBroker(tb, m)
		}
	})
	return m
}

// stopped records the brokers a test stopped itself.
var stopped = stopSet{m: map[*app.Main]bool{}}

type stopSet struct {
	mu sync.Mutex
	m  map[*app.Main]bool
}

func (s *stopSet) Load(m *app.Main) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.m[m] }

func stopBroker(tb testing.TB, m *app.Main) {
	tb.Helper()
	stopped.mu.Lock()
	stopped.m[m] = true
	stopped.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		tb.Fatalf("stop broker: %v", err)
	}
}

// cli runs the muster command line in-process.
func cli(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func mustClient(tb testing.TB, m *app.Main) *muster.Client {
	tb.Helper()
	c, err := muster.New(m.URL())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// desired lists a root through the broker's API.
func desired(tb testing.TB, c *muster.Client, root string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for s, err := range c.Fleet(root).Desired(context.Background()) {
		if err != nil {
			tb.Fatal(err)
		}
		out[s.Name] = string(s.Spec)
	}
	return out
}

// storeRows reads a bbolt file's root directly (a copy of it: opening
// writes).
func storeRows(tb testing.TB, path, root string) (rows map[string]string, next uint64) {
	tb.Helper()
	cp := filepath.Join(tb.TempDir(), fleetstore.BoltFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	s, err := fleetstore.OpenBolt(cp, nil)
	if err != nil {
		tb.Fatalf("the backup does not open as a bbolt store: %v", err)
	}
	defer s.Close()
	f := fleetstore.New(s)
	rows = map[string]string{}
	ctx := context.Background()
	names, err := f.Names(ctx, "default", root)
	if err != nil {
		tb.Fatal(err)
	}
	for _, n := range names {
		r, err := f.Get(ctx, "default", root, n)
		if err != nil {
			tb.Fatal(err)
		}
		rows[n] = string(r.Spec)
	}
	roots, _, err := f.Roots(ctx, "", "", 0)
	if err != nil {
		tb.Fatal(err)
	}
	for _, rc := range roots {
		if rc.Family == "default" && rc.Root == root {
			next = rc.Next
		}
	}
	return rows, next
}

// TestBackupWhileServing takes a backup with `muster backup` while 8
// clients register on the broker, then restores it.
//
// What it asserts of the copy: it opens as a bbolt fleet store; it holds
// every spec whose register was answered before the backup started, each
// with its bytes; and it is one snapshot: its specs are exactly w-1 …
// w-(counter-1), the registers committed before some instant, with the
// counter that goes with them (bbolt commits registers one at a time, in
// numbering order, so any other set would be a torn copy). Restoring it
// (stop, replace fleet.db, start) serves exactly that set, and the next
// register continues the counter.
func TestBackupWhileServing(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	m := startBroker(t, data, "")
	c := mustClient(t, m)
	ctx := context.Background()
	const root = "monitors"
	spec := func(i int) string { return fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("p", 2000)) }

	var mu sync.Mutex
	registered := map[string]string{} // every answered register
	register := func(i int) string {
		s, err := c.Fleet(root).Register(ctx, "w", jsonRaw(spec(i)))
		if err != nil {
			t.Error(err)
			return ""
		}
		mu.Lock()
		registered[s.Name] = string(s.Spec)
		mu.Unlock()
		return s.Name
	}
	for i := range 100 {
		register(i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
					register(1000*(g+1) + i)
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // registers in full flow
	mu.Lock()
	before := maps.Clone(registered)
	mu.Unlock()

	file := filepath.Join(dir, "backups", "fleet-backup.db")
	must(t, os.MkdirAll(filepath.Dir(file), 0o700))
	code, out, errOut := cli("backup", "--data-dir", data, "--to", file)
	time.Sleep(50 * time.Millisecond) // and after
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("muster backup: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "a consistent copy") {
		t.Errorf("muster backup said %q", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v; want mode 0600", fi, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*")); len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}

	got, next := storeRows(t, file, root)
	for name, s := range before {
		if got[name] != s {
			t.Fatalf("%s, answered before the backup, is %q in it, want %q", name, got[name], s)
		}
	}
	for i := uint64(1); i < next; i++ {
		name := fmt.Sprintf("w-%d", i)
		if _, ok := got[name]; !ok {
			t.Fatalf("the backup has counter %d but lacks %s: not one snapshot", next, name)
		}
	}
	if uint64(len(got)) != next-1 {
		t.Fatalf("the backup holds %d specs with counter %d: not one snapshot", len(got), next)
	}
	for name, s := range got {
		if registered[name] != s {
			t.Fatalf("%s is %q in the backup, registered as %q", name, s, registered[name])
		}
	}
	t.Logf("%d answered before the backup, %d in it, %d registered in all", len(before), len(got), len(registered))

	// Restore: stop the broker, put the copy in place, start again.
	stopBroker(t, m)
	b, err := os.ReadFile(file)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(data, fleetstore.BoltFileName), b, 0o600))
	m2 := startBroker(t, data, "")
	c2 := mustClient(t, m2)
	if served := desired(t, c2, root); !maps.Equal(served, got) {
		t.Fatalf("the restored broker serves %d specs, the backup holds %d", len(served), len(got))
	}
	s, err := c2.Fleet(root).Register(ctx, "w", jsonRaw(`{}`))
	must(t, err)
	if want := fmt.Sprintf("w-%d", next); s.Name != want {
		t.Fatalf("first register after the restore = %s, want %s", s.Name, want)
	}
}

// TestBackupRefusals: nothing is written when no copy can be made.
func TestBackupRefusals(t *testing.T) {
	dir := t.TempDir()
	to := filepath.Join(dir, "copy.db")
	must(t, os.WriteFile(to, []byte("old"), 0o600))
	keep := func(t *testing.T) {
		t.Helper()
		if b, _ := os.ReadFile(to); string(b) != "old" {
			t.Fatalf("--to was changed: %q", b)
		}
	}

	t.Run("Usage", func(t *testing.T) {
		if code, _, _ := cli("backup", "--data-dir", dir); code != 2 {
			t.Fatalf("backup without --to: exit %d, want 2", code)
		}
	})
	t.Run("NoBroker", func(t *testing.T) {
		code, _, errOut := cli("backup", "--data-dir", filepath.Join(dir, "none"), "--to", to)
		if code != 1 || !strings.Contains(errOut, "no broker answers") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
		keep(t)
	})
	t.Run("PostgresFlag", func(t *testing.T) {
		code, _, errOut := cli("backup", "--data-dir", dir, "--store", "postgres://u@127.0.0.1:1/db", "--to", to)
		if code != 1 || !strings.Contains(errOut, "pg_dump") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
		keep(t)
	})
	t.Run("LiveFile", func(t *testing.T) {
		data := filepath.Join(dir, "live")
		startBroker(t, data, "")
		code, _, errOut := cli("backup", "--data-dir", data, "--to", filepath.Join(data, ".", fleetstore.BoltFileName))
		if code != 1 || !strings.Contains(errOut, "live store") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
	})
	t.Run("PostgresBroker", func(t *testing.T) {
		// A broker on PostgreSQL answers the socket with the same advice.
		data := filepath.Join(dir, "pg")
		startBroker(t, data, pgtest.Schema(t, "backup"))
		code, _, errOut := cli("backup", "--data-dir", data, "--to", to)
		if code != 1 || !strings.Contains(errOut, "pg_dump") {
			t.Fatalf("exit %d, %q", code, errOut)
		}
		keep(t)
	})
	t.Run("SocketMode", func(t *testing.T) {
		data := filepath.Join(dir, "mode")
		m := startBroker(t, data, "")
		fi, err := os.Stat(filepath.Join(data, app.AdminSocket))
		must(t, err)
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("admin socket mode %v, want a socket of mode 0600", fi.Mode())
		}
		entries, _ := os.ReadDir(data)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "admin") && n != app.AdminSocket }) {
			t.Errorf("the private directory of the socket was left: %v", names)
		}
		stopBroker(t, m)
		if _, err := os.Stat(filepath.Join(data, app.AdminSocket)); !os.IsNotExist(err) {
			t.Fatalf("admin socket after the broker stopped: %v", err)
		}
	})
}

func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
