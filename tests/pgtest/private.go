package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Private is a PostgreSQL server of one test's own, started with
// tests/pg/start.sh under a state file of its own, so that stopping or
// restarting it cannot disturb the server the other test packages share.
type Private struct {
	tb testing.TB
	// URL is the server's connection URL.
	URL                  string
	bin, data, dir, port string
	asPostgres           bool
}

// StartPrivate starts a private server and stops it when the test ends. It
// returns nil when MUSTER_TEST_PG=off: the caller skips or runs without.
func StartPrivate(tb testing.TB) *Private {
	tb.Helper()
	if os.Getenv(EnvSwitch) == "off" {
		return nil
	}
	_, self, _, _ := runtime.Caller(0)
	scripts := filepath.Join(filepath.Dir(self), "..", "pg")
	state := filepath.Join(tb.TempDir(), "pg.state")
	env := append(withoutEnv(os.Environ(), EnvURL+"=", "MUSTER_TEST_PG_STATE="), "MUSTER_TEST_PG_STATE="+state)
	cmd := exec.Command("bash", filepath.Join(scripts, "start.sh"))
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("tests/pg/start.sh: %v", err)
	}
	p := &Private{tb: tb, URL: strings.TrimSpace(string(out)), asPostgres: os.Getuid() == 0}
	tb.Cleanup(func() {
		c := exec.Command("bash", filepath.Join(scripts, "stop.sh"))
		c.Env = env
		_ = c.Run()
	})
	st, err := os.ReadFile(state)
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "bin":
			p.bin = v
		case "data":
			p.data = v
		case "dir":
			p.dir = v
		case "port":
			p.port = v
		}
	}
	return p
}

// Stop stops the server (fast: connections are cut).
func (p *Private) Stop() {
	p.tb.Helper()
	p.pgctl("-D", p.data, "-m", "fast", "-w", "-t", "30", "stop")
}

// Start starts it again on the same port, as start.sh did.
func (p *Private) Start() {
	p.tb.Helper()
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", p.port, p.dir)
	p.pgctl("-D", p.data, "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
}

func (p *Private) pgctl(args ...string) {
	p.tb.Helper()
	name, argv := filepath.Join(p.bin, "pg_ctl"), args
	if p.asPostgres {
		name, argv = "runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, "pg_ctl")}, args...)
	}
	if out, err := exec.Command(name, argv...).CombinedOutput(); err != nil {
		p.tb.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

func withoutEnv(env []string, drop ...string) []string {
	var out []string
next:
	for _, e := range env {
		for _, d := range drop {
			if strings.HasPrefix(e, d) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}
