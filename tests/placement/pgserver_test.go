package placement

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// privatePG is a PostgreSQL server of the test's own, started with
// tests/pg/start.sh under a state file of its own, so that restarting it
// cannot disturb the server other tests share.
type privatePG struct {
	t                    *testing.T
	url                  string
	bin, data, dir, port string
	asPostgres           bool
}

func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	if os.Getenv("MUSTER_TEST_PG") == "off" {
		t.Skip("MUSTER_TEST_PG=off: PostgreSQL tests skipped on request")
	}
	state := filepath.Join(t.TempDir(), "pg.state")
	env := append(dropEnv(os.Environ(), "MUSTER_TEST_PG_URL=", "MUSTER_TEST_PG_STATE="), "MUSTER_TEST_PG_STATE="+state)
	cmd := exec.Command("bash", "../pg/start.sh")
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tests/pg/start.sh: %v", err)
	}
	p := &privatePG{t: t, url: strings.TrimSpace(string(out)), asPostgres: os.Getuid() == 0}
	t.Cleanup(func() {
		c := exec.Command("bash", "../pg/stop.sh")
		c.Env = env
		_ = c.Run()
	})
	st, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
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

func dropEnv(env []string, drop ...string) []string {
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

func (p *privatePG) pgctl(args ...string) {
	p.t.Helper()
	name, argv := filepath.Join(p.bin, "pg_ctl"), args
	if p.asPostgres {
		name, argv = "runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, "pg_ctl")}, args...)
	}
	if out, err := exec.Command(name, argv...).CombinedOutput(); err != nil {
		p.t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

// stop stops the server (fast: connections are cut).
func (p *privatePG) stop() { p.pgctl("-D", p.data, "-m", "fast", "-w", "-t", "30", "stop") }

// start starts it again on the same port, as start.sh did.
func (p *privatePG) start() {
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", p.port, p.dir)
	p.pgctl("-D", p.data, "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
}
