package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgServer is the PostgreSQL of the placed scenarios: the server of
// MUSTER_TEST_PG_URL when it is set, otherwise a private one started with
// tests/pg/start.sh on first use and stopped when the harness stops.
// MUSTER_TEST_PG=off opts out: placed scenarios are then skipped.
type pgServer struct {
	scripts string // the directory of start.sh and stop.sh ("" when unknown)
	state   string // the private server's state file
	url     string
	private bool
}

// base is the server's URL, starting the private server if needed.
func (p *pgServer) base() (string, error) {
	if p.url != "" {
		return p.url, nil
	}
	if why := skipReason(); why != "" {
		return "", errors.New(why)
	}
	if u := os.Getenv("MUSTER_TEST_PG_URL"); u != "" {
		p.url = u
		return u, nil
	}
	if p.scripts == "" {
		return "", errors.New("a placed scenario needs PostgreSQL: set MUSTER_TEST_PG_URL, or give --pg-scripts (run-harness.sh does)")
	}
	cmd := exec.Command("bash", filepath.Join(p.scripts, "start.sh"))
	cmd.Env = p.env()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("starting PostgreSQL (tests/pg/start.sh): %w", err)
	}
	p.private = true
	p.url = strings.TrimSpace(string(out))
	return p.url, nil
}

// skipReason is why placed scenarios cannot run here, "" when they can:
// MUSTER_TEST_PG=off, the project's opt-out when no PostgreSQL is available
// (tests/pg/start.sh). Without it a missing PostgreSQL is a failure.
func skipReason() string {
	if os.Getenv("MUSTER_TEST_PG") == "off" {
		return "a placed scenario needs PostgreSQL, and MUSTER_TEST_PG=off opts out of it"
	}
	return ""
}

// env is the harness's environment with the private server's state file.
func (p *pgServer) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MUSTER_TEST_PG_URL=") && !strings.HasPrefix(kv, "MUSTER_TEST_PG_STATE=") {
			env = append(env, kv)
		}
	}
	return append(env, "MUSTER_TEST_PG_STATE="+p.state)
}

// newSchema creates an empty schema and returns a URL whose connections use
// it alone (search_path), and the function that drops it.
func (p *pgServer) newSchema(ctx context.Context) (string, func(), error) {
	base, err := p.base()
	if err != nil {
		return "", nil, err
	}
	exec := func(ctx context.Context, sql string) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close(context.Background()) }()
		_, err = c.Exec(ctx, sql)
		return err
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	schema := "conformance_" + hex.EncodeToString(rnd)
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema: %w", err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() { _ = exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") }
	return u.String(), drop, nil
}

// close stops the private server, if one was started.
func (p *pgServer) close() {
	if !p.private {
		return
	}
	cmd := exec.Command("bash", filepath.Join(p.scripts, "stop.sh"))
	cmd.Env = p.env()
	cmd.Stderr = os.Stderr
	_ = cmd.Run()
	p.private = false
}
