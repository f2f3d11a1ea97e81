// Package pgtest gives tests an isolated schema on the throwaway PostgreSQL
// server that tests/pg/start.sh starts (its URL in MUSTER_TEST_PG_URL).
// Without that URL a test fails — never silently skips — unless
// MUSTER_TEST_PG=off asks to skip the PostgreSQL tests explicitly.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The environment variables the test runner sets.
const (
	EnvURL    = "MUSTER_TEST_PG_URL"
	EnvSwitch = "MUSTER_TEST_PG"
)

// URL is the test server's URL. It fails the test when none is configured,
// or skips it when MUSTER_TEST_PG=off.
func URL(tb testing.TB) string {
	tb.Helper()
	if os.Getenv(EnvSwitch) == "off" {
		tb.Skipf("%s=off: PostgreSQL tests skipped on request", EnvSwitch)
	}
	u := os.Getenv(EnvURL)
	if u == "" {
		tb.Fatalf("%s is not set: start a throwaway server with `export %s=$(tests/pg/start.sh)` "+
			"(stop it with tests/pg/stop.sh), or set %s=off to skip the PostgreSQL tests", EnvURL, EnvURL, EnvSwitch)
	}
	return u
}

// Schema creates an empty schema (named prefix_<random>) on the test server
// and returns a URL whose connections use it alone (search_path), so every
// test gets its own tables, migrations included. The schema is dropped when
// the test ends.
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	base := URL(tb)
	ctx := context.Background()
	exec := func(sql string) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close(ctx) }()
		_, err = c.Exec(ctx, sql)
		return err
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	schema := prefix + "_" + hex.EncodeToString(rnd)
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			tb.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
