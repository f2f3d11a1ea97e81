package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The client commands of the muster binary (session, lease, fleet), run as
// a person or a script would, against the real broker binary.

// cli runs the muster binary with MUSTER_ADDR pointing at the broker and
// the extra environment env ("K=V"); nothing of the machine's MUSTER_*.
type cli struct {
	tb   testing.TB
	addr string
	env  []string
}

func newCLI(tb testing.TB, p *process) *cli {
	return &cli{tb: tb, addr: "http://" + p.addr}
}

func (c *cli) command(args ...string) *exec.Cmd {
	cmd := exec.Command(musterBinary(c.tb), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUSTER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MUSTER_ADDR="+c.addr)
	cmd.Env = append(cmd.Env, c.env...)
	return cmd
}

// run runs the command to its end: stdout, stderr and the exit code.
func (c *cli) run(args ...string) (string, string, int) {
	c.tb.Helper()
	cmd := c.command(args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		c.tb.Fatal(err)
	}
	return o.String(), e.String(), code
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.tb.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.tb.Fatalf("muster %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail with code and a stderr containing want.
func (c *cli) fails(code int, want string, args ...string) {
	c.tb.Helper()
	out, errOut, got := c.run(args...)
	if got != code || !strings.Contains(errOut, want) {
		c.tb.Fatalf("muster %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, want, out, errOut)
	}
}

func (c *cli) json(v any, args ...string) {
	c.tb.Helper()
	out := c.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.tb.Fatalf("muster %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestCLISessionsAndLeases(t *testing.T) {
	c := newCLI(t, startProcess(t, "--addr", "127.0.0.1:0"))
	var sess struct {
		SessionID string `json:"session_id"`
		OwnerID   string `json:"owner_id"`
		TTLMs     int64  `json:"ttl_ms"`
	}
	c.json(&sess, "session", "create", "--owner", "cron-1", "--ttl", "2m")
	if len(sess.SessionID) != 32 || sess.OwnerID != "cron-1" || sess.TTLMs != 120000 {
		t.Fatalf("session create: %+v", sess)
	}
	if out := c.ok("session", "create"); !regexp.MustCompile(`(?m)^session_id\s+[0-9a-f]{32}$`).MatchString(out) {
		t.Fatalf("session create (table):\n%s", out)
	}
	c.env = []string{"MUSTER_SESSION=" + sess.SessionID}

	// Flags may follow the route; the table is for people.
	out := c.ok("lease", "acquire", "lease://acme/cron/nightly", "--ttl", "5m")
	for _, want := range []string{"route          lease://acme/cron/nightly", "fencing_token  1", "outcome        acquired"} {
		if !strings.Contains(out, want) {
			t.Fatalf("lease acquire table lacks %q:\n%s", want, out)
		}
	}
	var lease struct {
		FencingToken int64  `json:"fencing_token"`
		Outcome      string `json:"outcome"`
	}
	c.json(&lease, "lease", "acquire", "acme/cron/nightly")
	if lease.FencingToken != 1 || lease.Outcome != "already_held" {
		t.Fatalf("second acquire: %+v", lease)
	}
	c.ok("lease", "extend", "lease://acme/cron/nightly", "--fencing-token", "1", "--ttl", "1m")
	c.fails(1, "fenced: the fencing token is not the current one", "lease", "release", "lease://acme/cron/nightly", "--fencing-token", "9")

	list := c.ok("lease", "list", "lease://acme/**")
	if !regexp.MustCompile(`(?m)^ROUTE\s+OWNER\s+EXPIRES\s+REMAINING\s+RENEWALS\n` + `lease://acme/cron/nightly\s+cron-1\s+\S+Z\s+\S+\s+1$`).MatchString(list) {
		t.Fatalf("lease list:\n%s", list)
	}
	var items []struct {
		Route   string `json:"route"`
		OwnerID string `json:"owner_id"`
	}
	c.json(&items, "lease", "list", "lease://acme/*/*")
	if len(items) != 1 || items[0].OwnerID != "cron-1" || items[0].Route != "lease://acme/cron/nightly" {
		t.Fatalf("lease list -o json: %+v", items)
	}
	var st struct {
		Held   bool `json:"held"`
		Holder struct {
			OwnerID string `json:"owner_id"`
		} `json:"holder"`
	}
	c.json(&st, "lease", "get", "lease://acme/cron/nightly")
	if !st.Held || st.Holder.OwnerID != "cron-1" {
		t.Fatalf("lease get: %+v", st)
	}
	c.ok("lease", "release", "lease://acme/cron/nightly", "--fencing-token", "1")
	if out := c.ok("lease", "get", "lease://acme/cron/nightly"); !regexp.MustCompile(`(?m)^held\s+no$`).MatchString(out) {
		t.Fatalf("after release:\n%s", out)
	}

	// Flags override the environment.
	c.env = append(c.env, "MUSTER_ADDR=http://127.0.0.1:1")
	c.fails(1, "connection refused", "lease", "get", "lease://acme/cron/nightly")
	c.ok("lease", "get", "lease://acme/cron/nightly", "--addr", c.addr)
	c.env = c.env[:1]
	// Several brokers: a dead one first, then this one (both bare host:port).
	c.env = append(c.env, "MUSTER_ADDR=127.0.0.1:1, "+strings.TrimPrefix(c.addr, "http://"))
	c.ok("lease", "get", "lease://acme/cron/nightly")
	c.env = c.env[:1]

	c.ok("session", "keepalive", sess.SessionID)
	c.ok("session", "end", sess.SessionID)
	c.fails(1, "session_not_found", "session", "keepalive", sess.SessionID)
	c.fails(1, "session_not_found", "lease", "acquire", "lease://acme/cron/nightly")
}

func TestCLIFleet(t *testing.T) {
	c := newCLI(t, startProcess(t, "--addr", "127.0.0.1:0"))
	if out := c.ok("fleet", "register", "monitors", "repo", `{"topic":"releases"}`); out != "repo-1\n" {
		t.Fatalf("fleet register: %q", out)
	}
	spec := t.TempDir() + "/spec.json"
	if err := os.WriteFile(spec, []byte(`{"schedule":"@hourly"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok("fleet", "register", "monitors", "repo", "@"+spec)
	desired := c.ok("fleet", "desired", "monitors")
	if !regexp.MustCompile(`(?s)^NAME\s+SPEC\nrepo-1\s+\{"topic":"releases"\}\nrepo-2\s+\{"schedule":"@hourly"\}\n$`).MatchString(desired) {
		t.Fatalf("fleet desired:\n%s", desired)
	}
	var plan struct{ Missing, Orphans []string }
	c.json(&plan, "fleet", "plan", "--desired", "repo-1,repo-2", "--live", "repo-2,repo-9")
	if strings.Join(plan.Missing, ",") != "repo-1" || strings.Join(plan.Orphans, ",") != "repo-9" {
		t.Fatalf("fleet plan: %+v", plan)
	}
	var gap struct {
		Missing  []string `json:"missing"`
		Revision *int64   `json:"revision"`
	}
	c.json(&gap, "fleet", "gap", "monitors", "lease://acme/monitors/*")
	if strings.Join(gap.Missing, ",") != "repo-1,repo-2" || gap.Revision == nil {
		t.Fatalf("fleet gap: %+v", gap)
	}
	sweep := c.ok("fleet", "sweep", "monitors", `{"type":"object","required":["topic"]}`)
	if !strings.Contains(sweep, "kept 1, dropped 1") || !regexp.MustCompile(`(?m)^dropped\s+repo-2$`).MatchString(sweep) {
		t.Fatalf("fleet sweep:\n%s", sweep)
	}
	c.ok("fleet", "forget", "monitors", "repo-1")
	if out := c.ok("fleet", "desired", "monitors", "-o", "json"); out != "[]\n" {
		t.Fatalf("after forget: %q", out)
	}
	c.fails(1, "invalid_name", "fleet", "forget", "monitors", "Repo-1")
	c.fails(2, "is not JSON", "fleet", "register", "monitors", "repo", "{nope")
}

// TestCLIWatch: `muster lease watch` prints what is held, then each change
// as it happens, and Ctrl-C (SIGINT) ends it with exit status 0.
func TestCLIWatch(t *testing.T) {
	c := newCLI(t, startProcess(t, "--addr", "127.0.0.1:0"))
	var sess struct {
		SessionID string `json:"session_id"`
	}
	c.json(&sess, "session", "create", "--owner", "w1")
	c.env = []string{"MUSTER_SESSION=" + sess.SessionID}
	c.ok("lease", "acquire", "lease://acme/r/doc-1", "--ttl", "5m")

	w := c.command("lease", "watch", "lease://acme/r/*")
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	w.Stderr = &stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case l := <-lines:
			if !regexp.MustCompile(want).MatchString(l) {
				t.Fatalf("watch printed %q, want %s", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch printed nothing matching %s\n%s", want, stderr.String())
		}
	}
	next(`^REVISION\s+KIND\s+ROUTE\s+OWNER$`)
	next(`^1\s+held\s+lease://acme/r/doc-1\s+w1$`)
	next(`^1\s+snapshot\s+\s+-$`)
	c.ok("lease", "acquire", "lease://acme/r/doc-2")
	next(`^2\s+acquired\s+lease://acme/r/doc-2\s+w1$`)
	c.ok("lease", "release", "lease://acme/r/doc-1", "--fencing-token", "1")
	next(`^3\s+released\s+lease://acme/r/doc-1\s+-$`)

	if err := w.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch did not exit after SIGINT")
	}

	// -o json over an empty snapshot: one snapshot record says it is
	// complete, so a script knows the changes start after it.
	e := c.command("lease", "watch", "lease://acme/empty/*", "-o", "json")
	eout, err := e.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Process.Kill() })
	first, err := bufio.NewReader(eout).ReadString('\n')
	if err != nil || first != `{"revision":3,"kind":"snapshot","selector":"lease://acme/empty/*"}`+"\n" {
		t.Fatalf("watch -o json of an empty selector printed %q (%v)", first, err)
	}
	_ = e.Process.Signal(syscall.SIGINT)
	_ = e.Wait()
}

// TestCLIWatchFollowsRestart: `lease watch` outlives a broker restart, as
// the dashboard and the SDK observers do: it says so on stderr and prints
// the new broker's snapshot (it used to exit 1).
func TestCLIWatchFollowsRestart(t *testing.T) {
	p := startProcess(t, "--addr", "127.0.0.1:0")
	c := newCLI(t, p)
	w := c.command("lease", "watch", "lease://acme/r/*", "-o", "json")
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	w.Stderr = &stderr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill() })
	rd := bufio.NewReader(stdout)
	readLine := func() string {
		t.Helper()
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("watch ended: %v\n%s", err, stderr.String())
		}
		return l
	}
	if l := readLine(); !strings.Contains(l, `"kind":"snapshot"`) {
		t.Fatalf("first line %q", l)
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	q := startProcess(t, "--addr", p.addr)
	c2 := newCLI(t, q)
	var sess struct {
		SessionID string `json:"session_id"`
	}
	c2.json(&sess, "session", "create", "--owner", "after")
	c2.env = []string{"MUSTER_SESSION=" + sess.SessionID}
	c2.ok("lease", "acquire", "lease://acme/r/doc-9")
	// The new snapshot record and doc-9, in either order: the watch may be
	// back before the acquire (snapshot, then doc-9 as a change) or after
	// it (doc-9 in the snapshot's items, printed before its record).
	var seen string
	for !strings.Contains(seen, "doc-9") || !strings.Contains(seen, `"kind":"snapshot"`) {
		seen += readLine()
	}
	if !strings.Contains(seen, `"kind":"snapshot"`) || !strings.Contains(stderr.String(), "watching again") {
		t.Fatalf("after the restart: stdout %q, stderr %q", seen, stderr.String())
	}
	_ = w.Process.Signal(syscall.SIGINT)
	if err := w.Wait(); err != nil {
		t.Fatalf("watch after Ctrl-C: %v", err)
	}
}

// TestCLILeaseRun: `muster lease run` holds the lease while the command
// runs (renewing it), gives the command the route and fencing token,
// passes on its exit status, releases the lease after, and signals the
// command when the lease is lost.
func TestCLILeaseRun(t *testing.T) {
	p := startProcess(t, "--addr", "127.0.0.1:0")
	c := newCLI(t, p)
	bin := musterBinary(t)

	// Held and renewed while it runs: the command itself asks the broker.
	script := `echo "route=$MUSTER_LEASE_ROUTE token=$MUSTER_FENCING_TOKEN"; sleep 1; "$0" lease get "$MUSTER_LEASE_ROUTE" -o json; exit 7`
	out, errOut, code := c.run("lease", "run", "lease://acme/cron/backup", "--ttl", "300ms", "--owner", "backup", "--", "sh", "-c", script, bin)
	if code != 7 {
		t.Fatalf("lease run: exit %d, want the command's 7\n%s%s", code, out, errOut)
	}
	first, rest, _ := strings.Cut(out, "\n")
	if first != "route=lease://acme/cron/backup token=1" {
		t.Fatalf("the command saw %q", first)
	}
	var st struct {
		Held   bool `json:"held"`
		Holder struct {
			OwnerID  string `json:"owner_id"`
			Renewals int64  `json:"renewals"`
		} `json:"holder"`
	}
	if err := json.Unmarshal([]byte(rest), &st); err != nil || !st.Held || st.Holder.OwnerID != "backup" || st.Holder.Renewals < 2 {
		t.Fatalf("while the command ran: %+v %v (%s)", st, err, rest)
	}
	if out := c.ok("lease", "get", "lease://acme/cron/backup"); !regexp.MustCompile(`(?m)^held\s+no$`).MatchString(out) {
		t.Fatalf("after the command:\n%s", out)
	}

	// A lease held by someone else: the command does not run.
	var sess struct {
		SessionID string `json:"session_id"`
	}
	c.json(&sess, "session", "create")
	c.env = []string{"MUSTER_SESSION=" + sess.SessionID}
	c.ok("lease", "acquire", "lease://acme/cron/backup", "--ttl", "1m")
	out, errOut, code = c.run("lease", "run", "lease://acme/cron/backup", "--", "sh", "-c", "echo ran")
	if code != 75 || strings.Contains(out, "ran") || !strings.Contains(errOut, "lease_held") {
		t.Fatalf("lease run on a held lease: exit %d, want 75\n%s%s", code, out, errOut)
	}
	start := time.Now()
	out, errOut, code = c.run("lease", "run", "lease://acme/cron/backup", "--wait", "1500ms", "--", "sh", "-c", "echo ran")
	if took := time.Since(start); code != 75 || strings.Contains(out, "ran") || !strings.Contains(errOut, "wait_timeout") || took < 1500*time.Millisecond {
		t.Fatalf("lease run whose wait ran out: exit %d after %v, want 75 after 1.5 s\n%s%s", code, took, out, errOut)
	}

	// Ctrl-C to muster is passed on; the lease is released after.
	var ee *exec.ExitError
	stop := c.command("lease", "run", "lease://acme/cron/stopped", "--",
		"sh", "-c", `trap 'exit 5' TERM; echo started; while :; do sleep 0.1; done`)
	stopOut, err := stop.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop.Process.Kill() })
	if l, _ := bufio.NewReader(stopOut).ReadString('\n'); l != "started\n" {
		t.Fatalf("command printed %q", l)
	}
	_ = stop.Process.Signal(syscall.SIGINT)
	if err := stop.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Fatalf("lease run after SIGINT: %v, want the command's exit status 5", err)
	}
	if out := c.ok("lease", "get", "lease://acme/cron/stopped"); !regexp.MustCompile(`(?m)^held\s+no$`).MatchString(out) {
		t.Fatalf("after SIGINT:\n%s", out)
	}

	// The broker dies while the command runs. Extensions fail; a third of
	// the TTL before the local deadline the command is told to stop
	// (SIGTERM), and when the lease is lost (another session may hold it
	// from the broker's expiry on, and the loss is declared at a local
	// deadline that is not after it) a command still running is killed.
	// Either way lease run exits 76.
	for _, tc := range []struct {
		name, trap, stdout, stderr string
	}{
		{"stops on SIGTERM", `trap 'echo got-sigterm; exit 42' TERM`, "got-sigterm\n", "could not be extended"},
		{"ignores SIGTERM", `trap '' TERM`, "", "the lease is lost"},
	} {
		q := startProcess(t, "--addr", "127.0.0.1:0")
		c2 := newCLI(t, q)
		run := c2.command("lease", "run", "lease://acme/cron/lost", "--ttl", "1s", "--",
			"sh", "-c", tc.trap+`; echo started; while :; do sleep 0.05; done`)
		stdout, err := run.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		run.Stderr = &stderr
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = run.Process.Kill() })
		rd := bufio.NewReader(stdout)
		if l, _ := rd.ReadString('\n'); l != "started\n" {
			t.Fatalf("%s: command printed %q", tc.name, l)
		}
		_ = q.cmd.Process.Kill()
		start = time.Now()
		rest, _ := io.ReadAll(rd)
		err = run.Wait()
		took := time.Since(start)
		if !errors.As(err, &ee) || ee.ExitCode() != 76 || string(rest) != tc.stdout || !strings.Contains(stderr.String(), tc.stderr) {
			t.Fatalf("%s: %v after %v, want exit 76, stdout %q and %q on stderr; stdout %q, stderr %s",
				tc.name, err, took, tc.stdout, tc.stderr, rest, stderr.String())
		}
		// The last extension came at most a third of the TTL before the
		// kill, so the local deadline is at most 1 s after it.
		if took > 1500*time.Millisecond {
			t.Fatalf("%s: the command ended %v after the broker died (lease TTL 1s)", tc.name, took)
		}
		t.Logf("%s: lease run ended %v after the broker died", tc.name, took.Round(time.Millisecond))
	}
}

// TestCLILeaseRunNeverOverlaps: two `lease run`s of one route never run
// their commands at once, though the first one is told to stop (SIGTERM)
// and its command ignores that and runs on for seconds past its lease's
// TTL: the lease is renewed until the command has exited. Each command
// writes its start and end (the machine's clock) to one file; the second
// must start after the first ended. The first used to stop renewing at the
// SIGTERM and the second got the lease while the first command ran.
func TestCLILeaseRunNeverOverlaps(t *testing.T) {
	p := startProcess(t, "--addr", "127.0.0.1:0")
	c := newCLI(t, p)
	log := filepath.Join(t.TempDir(), "log")
	body := func(name string, secs string) string {
		return `trap '' TERM; echo "` + name + ` start $(date +%s.%N)" >> ` + log + `; sleep ` + secs + `; echo "` + name + ` end $(date +%s.%N)" >> ` + log
	}
	a := c.command("lease", "run", "lease://acme/jobs/nightly", "--ttl", "1s", "--", "sh", "-c", body("a", "4"))
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Kill() })
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(readFile(t, log), "a start") {
		if time.Now().After(deadline) {
			t.Fatal("the first command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := c.command("lease", "run", "lease://acme/jobs/nightly", "--ttl", "1s", "--wait", "1m", "--", "sh", "-c", body("b", "0"))
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Process.Kill() })
	time.Sleep(300 * time.Millisecond)
	_ = a.Process.Signal(syscall.SIGTERM) // the command ignores it and runs 4 s
	aErr, bErr := a.Wait(), b.Wait()
	if aErr != nil || bErr != nil {
		t.Fatalf("exits: first %v, second %v\n%s", aErr, bErr, readFile(t, log))
	}
	at := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, log)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("log line %q", line)
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		at[f[0]+" "+f[1]] = v
	}
	t.Logf("first command %.3f..%.3f, second %.3f..%.3f", at["a start"], at["a end"], at["b start"], at["b end"])
	if at["b start"] <= at["a end"] {
		t.Fatalf("the second command started %.3f s before the first ended", at["a end"]-at["b start"])
	}
}

// TestCLIVersion: `muster version` and `muster --version` print one line
// naming the binary, its module version, its commit and its Go version.
func TestCLIVersion(t *testing.T) {
	want := regexp.MustCompile(`^muster (\S+) (unknown|[0-9a-f]{40}(?:\+modified)?) (?:(\S+Z) )?(go1\.\S+)\n$`)
	var m []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(musterBinary(t), args...).Output()
		if m = want.FindStringSubmatch(string(out)); err != nil || m == nil {
			t.Fatalf("muster %s: %q, %v", args[0], out, err)
		}
	}
	// /healthz says the same of the running broker.
	p := startProcess(t, "--addr", "127.0.0.1:0")
	resp, err := http.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Version    string `json:"version"`
		Commit     string `json:"commit"`
		CommitTime string `json:"commit_time"`
		GoVersion  string `json:"go_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if got := []string{h.Version, h.Commit, h.CommitTime, h.GoVersion}; !slices.Equal(got, m[1:]) {
		t.Fatalf("/healthz build %q, muster version %q", got, m[1:])
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func TestCLIUsage(t *testing.T) {
	c := &cli{tb: t, addr: "http://127.0.0.1:1"}
	for _, args := range [][]string{
		{"session", "--help"}, {"lease", "--help"}, {"fleet", "--help"}, {"help", "lease"},
		{"session", "create", "--help"}, {"lease", "acquire", "--help"}, {"lease", "watch", "-h"},
		{"lease", "run", "--help"}, {"fleet", "sweep", "--help"}, {"version", "--help"},
	} {
		out, errOut, code := c.run(args...)
		if code != 0 || !strings.Contains(out, "usage:") || errOut != "" {
			t.Errorf("muster %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	c.env = []string{"MUSTER_TOKEN=secret-token-7731", "MUSTER_SESSION=0123456789abcdef0123456789abcdef"}
	if out, _, _ := c.run("lease", "acquire", "--help"); strings.Contains(out, "7731") || strings.Contains(out, "0123456789abcdef") {
		t.Errorf("--help shows a secret from the environment:\n%s", out)
	}
	c.env = nil
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"no verb given", []string{"lease"}},
		{`unknown verb "grab"`, []string{"lease", "grab"}},
		{"expected ROUTE", []string{"lease", "acquire"}},
		{"no session", []string{"lease", "acquire", "lease://a/b/c"}},
		{`route "a/b": want lease://realm/area/resource`, []string{"lease", "acquire", "a/b", "--session", "x"}},
		{`unexpected argument "extra"`, []string{"lease", "get", "lease://a/b/c", "extra"}},
		{"-o must be table or json", []string{"lease", "get", "lease://a/b/c", "-o", "yaml"}},
		{"expected ROUTE -- COMMAND", []string{"lease", "run", "lease://a/b/c"}},
		// Durations and the fencing token are checked before any request,
		// against the ranges --help states.
		{"--ttl 20m0s is outside 100ms..10m", []string{"lease", "acquire", "lease://a/b/c", "--ttl", "20m"}},
		{"--ttl 50ms is outside 100ms..10m", []string{"lease", "extend", "lease://a/b/c", "--ttl", "50ms", "--fencing-token", "3"}},
		{"--wait 1m0s is outside 0..30s", []string{"lease", "acquire", "lease://a/b/c", "--wait", "1m"}},
		{"--fencing-token is required", []string{"lease", "extend", "lease://a/b/c"}},
		{"--fencing-token is required", []string{"lease", "release", "lease://a/b/c"}},
		{"--ttl 500ms is outside 1s..10m", []string{"session", "create", "--ttl", "500ms"}},
		{"--ttl 50ms is outside 100ms..10m", []string{"lease", "run", "lease://a/b/c", "--ttl", "50ms", "--", "true"}},
		{"flag provided but not defined: -bogus", []string{"fleet", "desired", "m", "--bogus"}},
		{"expected ROOT KIND SPEC", []string{"fleet", "register", "m"}},
	} {
		c.fails(2, tc.want, tc.args...)
	}
}

// TestDocsCLICommands: every `muster …` command line shown in a code block
// of README.md and docs/operations.md names a real command and real flags:
// run with --help (before any `--`), each must exit 0.
func TestDocsCLICommands(t *testing.T) {
	bin := musterBinary(t)
	cmdRe := regexp.MustCompile(`(?:^|\s)(muster [a-z].*)$`)
	n := 0
	for _, doc := range []string{"../../README.md", "../../docs/operations.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range mdBlocks(string(text)) {
			if b.info != "sh" && b.info != "" {
				continue
			}
			for line := range strings.Lines(b.body) {
				m := cmdRe.FindStringSubmatch(strings.TrimSpace(line))
				if m == nil || strings.ContainsAny(m[1], "[|…") {
					continue // a synopsis, not a command
				}
				cmd := m[1]
				if i := strings.Index(cmd, " #"); i >= 0 {
					cmd = cmd[:i]
				}
				cmd, _, _ = strings.Cut(cmd, " -- ")
				sh := exec.Command("sh", "-c", strings.TrimSpace(cmd)+" --help")
				sh.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "MUSTER_SESSION=x")
				if out, err := sh.CombinedOutput(); err != nil {
					t.Errorf("%s: %q is not a valid command: %v\n%s", doc, m[1], err, out)
				}
				n++
			}
		}
	}
	if n < 12 {
		t.Fatalf("found only %d muster command lines in the docs", n)
	}
	t.Logf("%d command lines checked", n)
}

// A route segment may hold a bidirectional override (the grammar refuses
// only control characters); the CLI shows such a route escaped, in tables
// and in JSON, so it cannot disguise itself on an operator's screen, and
// the value itself is intact.
func TestCLIEscapesWhatItPrints(t *testing.T) {
	c := newCLI(t, startProcess(t, "--addr", "127.0.0.1:0"))
	var sess struct {
		SessionID string `json:"session_id"`
	}
	c.json(&sess, "session", "create", "--owner", "cron-1")
	c.env = []string{"MUSTER_SESSION=" + sess.SessionID}
	const route = "lease://acme/r/invoice\u202efdp.exe"
	for _, args := range [][]string{
		{"lease", "acquire", route},
		{"lease", "list", "lease://acme/**"},
		{"lease", "list", "lease://acme/**", "-o", "json"},
		{"lease", "get", route, "-o", "json"},
	} {
		out := c.ok(args...)
		if strings.ContainsRune(out, '\u202e') || !strings.Contains(out, `invoice\u202efdp.exe`) {
			t.Errorf("muster %s prints the override raw, or not at all:\n%q", strings.Join(args, " "), out)
		}
	}
	var items []struct {
		Route string `json:"route"`
	}
	c.json(&items, "lease", "list", "lease://acme/**")
	if len(items) != 1 || items[0].Route != route {
		t.Fatalf("lease list -o json: %+q", items)
	}
}

// TestCLILeaseRunExitCodes: the statuses of `lease run` that are its own,
// beside those TestCLILeaseRun shows (75 held, 76 lost, the command's):
// 69 when no broker answers, 127 when the command cannot be started (the
// lease is released then), 2 for bad usage.
func TestCLILeaseRunExitCodes(t *testing.T) {
	dead := &cli{tb: t, addr: "http://127.0.0.1:1"}
	if _, errOut, code := dead.run("lease", "run", "lease://acme/cron/x", "--", "true"); code != 69 {
		t.Fatalf("no broker: exit %d, want 69\n%s", code, errOut)
	}
	c := newCLI(t, startProcess(t, "--addr", "127.0.0.1:0"))
	if _, errOut, code := c.run("lease", "run", "lease://acme/cron/x", "--", "/nonexistent/command"); code != 127 {
		t.Fatalf("a command that cannot start: exit %d, want 127\n%s", code, errOut)
	}
	if out := c.ok("lease", "get", "lease://acme/cron/x"); !regexp.MustCompile(`(?m)^held\s+no$`).MatchString(out) {
		t.Fatalf("after a command that could not start:\n%s", out)
	}
	if _, _, code := c.run("lease", "run", "lease://acme/cron/x", "--ttl", "1h", "--", "true"); code != 2 {
		t.Fatalf("a bad --ttl: exit %d, want 2", code)
	}
}
