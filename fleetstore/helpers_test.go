package fleetstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"testing"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/tests/pgtest"
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

// PostgresURL is the test server's URL (see tests/pgtest).
func PostgresURL(tb testing.TB) string { tb.Helper(); return pgtest.URL(tb) }

// MustPostgresSchema gives the test a schema of its own on the test server,
// dropped when the test ends (see tests/pgtest).
func MustPostgresSchema(tb testing.TB) string { tb.Helper(); return pgtest.Schema(tb, "t") }

func randomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// wantCode fails the test unless err carries code.
func wantCode(tb testing.TB, err error, code muster.Code) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("err = nil, want code %s", code)
	}
	var ce *muster.Error
	if !errors.As(err, &ce) {
		tb.Fatalf("err = %v (%T), want a *muster.Error with code %s", err, err, code)
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
