package fault

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePG is a PostgreSQL server of the campaign's own, started with
// tests/pg/start.sh under a state file of its own: stopping it cannot
// disturb the server the other test packages share.
type privatePG struct {
	t                    *testing.T
	url                  string
	state                string
	bin, data, dir, port string
	asPostgres           bool
}

// startPrivatePG returns nil when MUSTER_TEST_PG=off.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	if os.Getenv("MUSTER_TEST_PG") == "off" {
		t.Log("MUSTER_TEST_PG=off: the campaign runs on bbolt and injects no PostgreSQL faults")
		return nil
	}
	p := &privatePG{t: t, state: filepath.Join(t.TempDir(), "pg.state"), asPostgres: os.Getuid() == 0}
	cmd := exec.Command("bash", "../pg/start.sh")
	cmd.Env = append(filterEnv(os.Environ(), "MUSTER_TEST_PG_URL=", "MUSTER_TEST_PG_STATE="), "MUSTER_TEST_PG_STATE="+p.state)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tests/pg/start.sh: %v", err)
	}
	p.url = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		c := exec.Command("bash", "../pg/stop.sh")
		c.Env = append(filterEnv(os.Environ(), "MUSTER_TEST_PG_URL=", "MUSTER_TEST_PG_STATE="), "MUSTER_TEST_PG_STATE="+p.state)
		_ = c.Run()
	})
	st, err := os.ReadFile(p.state)
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

func filterEnv(env []string, drop ...string) []string {
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

func (p *privatePG) pgctl(args ...string) error {
	name, argv := filepath.Join(p.bin, "pg_ctl"), args
	if p.asPostgres {
		name, argv = "runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, "pg_ctl")}, args...)
	}
	out, err := exec.Command(name, argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %v\n%s", args, err, out)
	}
	return nil
}

// stop stops the server (fast: connections are cut).
func (p *privatePG) stop() {
	p.t.Helper()
	if err := p.pgctl("-D", p.data, "-m", "fast", "-w", "-t", "30", "stop"); err != nil {
		p.t.Fatal(err)
	}
}

// start starts it again on the same port, as start.sh did.
func (p *privatePG) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", p.port, p.dir)
	if err := p.pgctl("-D", p.data, "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		p.t.Fatal(err)
	}
}

// cut terminates every connection of the broker (application_name muster).
func (p *privatePG) cut() int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, p.url)
	if err != nil {
		p.t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'muster'`).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}
