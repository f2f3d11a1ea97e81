package fleetstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/musterhq/muster/core"
)

// The PostgreSQL suites read the server from MUSTER_TEST_PG_URL (tests/pg/start.sh
// prints one). Without it they fail, unless MUSTER_TEST_PG=off says to skip.
const (
	envPGURL = "MUSTER_TEST_PG_URL"
	envPG    = "MUSTER_TEST_PG"
)

// storage is where one test's data lives. open returns a new Store on it,
// closed when the test ends; opening again plays a broker restart.
type storage struct {
	name string
	open func() Store
}

// backends lists the implementations every conformance test runs against.
var backends = []struct {
	name string
	new  func(tb testing.TB) storage
}{
	{"bolt", newBoltStorage},
	{"postgres", newPostgresStorage},
}

// newBoltStorage is a bbolt file in a fresh temporary directory.
func newBoltStorage(tb testing.TB) storage {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), BoltFileName)
	return storage{name: path, open: func() Store { return MustOpenBoltAt(tb, path) }}
}

// newPostgresStorage is a fresh PostgreSQL schema, dropped when the test ends.
func newPostgresStorage(tb testing.TB) storage {
	tb.Helper()
	u := MustPostgresSchema(tb)
	return storage{name: u, open: func() Store { return MustOpenPostgresURL(tb, u) }}
}

// MustOpenBolt opens a store in a fresh bbolt file, closed when the test ends.
func MustOpenBolt(tb testing.TB) Store {
	tb.Helper()
	return newBoltStorage(tb).open()
}

// MustOpenBoltAt opens the bbolt file at path, closed when the test ends.
func MustOpenBoltAt(tb testing.TB, path string) Store {
	tb.Helper()
	s, err := OpenBolt(path, nil)
	if err != nil {
		tb.Fatalf("OpenBolt: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// MustOpenPostgres opens a store in a fresh PostgreSQL schema, closed and
// dropped when the test ends.
func MustOpenPostgres(tb testing.TB) Store {
	tb.Helper()
	return newPostgresStorage(tb).open()
}

// MustOpenPostgresURL opens the store at u, closed when the test ends.
func MustOpenPostgresURL(tb testing.TB, u string) Store {
	tb.Helper()
	s, err := OpenPostgres(context.Background(), u)
	if err != nil {
		tb.Fatalf("OpenPostgres: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// PostgresURL is the test server's URL. It fails the test when none is
// configured, or skips it when MUSTER_TEST_PG=off.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	if os.Getenv(envPG) == "off" {
		tb.Skipf("%s=off: PostgreSQL tests skipped on request", envPG)
	}
	u := os.Getenv(envPGURL)
	if u == "" {
		tb.Fatalf("%s is not set: start a throwaway server with "+
			"`export %s=$(tests/pg/start.sh)` (stop it with tests/pg/stop.sh), "+
			"or set %s=off to skip the PostgreSQL tests", envPGURL, envPGURL, envPG)
	}
	return u
}

// MustPostgresSchema creates an empty schema on the test server and returns
// a URL whose connections use it alone (search_path), so every test gets its
// own tables, migrations included. The schema is dropped when the test ends.
func MustPostgresSchema(tb testing.TB) string {
	tb.Helper()
	base := PostgresURL(tb)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to %s: %v", envPGURL, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	schema := "t_" + randomHex(tb, 8)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop schema: %v", err)
			return
		}
		defer func() { _ = c.Close(ctx) }()
		if _, err := c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("parse %s: %v", envPGURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// wantCode fails the test unless err carries code.
func wantCode(tb testing.TB, err error, code core.Code) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("err = nil, want code %s", code)
	}
	var ce *core.Error
	if !errors.As(err, &ce) {
		tb.Fatalf("err = %v (%T), want a *core.Error with code %s", err, err, code)
	}
	if ce.Code != code {
		tb.Fatalf("code = %s (%v), want %s", ce.Code, err, code)
	}
}

// must fails the test on err.
func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
