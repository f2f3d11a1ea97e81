package fleetstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

func TestOpen(t *testing.T) {
	t.Run("DefaultIsBoltInDataDir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "muster-data")
		s, err := Open(ctx, dir, "")
		must(t, err)
		defer func() { _ = s.Close() }()
		if _, ok := s.(*boltStore); !ok {
			t.Fatalf("Open(dir, \"\") = %T, want the bbolt store", s)
		}
		if _, err := os.Stat(filepath.Join(dir, BoltFileName)); err != nil {
			t.Fatalf("no %s in the data directory: %v", BoltFileName, err)
		}
	})
	t.Run("UnknownScheme", func(t *testing.T) {
		_, err := Open(ctx, t.TempDir(), "mysql://localhost/x")
		wantCode(t, err, muster.CodeInvalidRequest)
	})
	t.Run("PostgresUnreachable", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := Open(cctx, "", "postgres://nobody:secret@127.0.0.1:1/none?sslmode=disable")
		wantCode(t, err, muster.CodeUnavailable)
		if err != nil && containsSecret(err.Error()) {
			t.Errorf("error text quotes the password: %v", err)
		}
	})
	t.Run("PostgresBadURL", func(t *testing.T) {
		_, err := Open(ctx, "", "postgres://nobody:secret@127.0.0.1:1/none?sslmode=bogus")
		wantCode(t, err, muster.CodeInternal)
		if err != nil && containsSecret(err.Error()) {
			t.Errorf("error text quotes the password: %v", err)
		}
	})
}

func containsSecret(s string) bool {
	for i := 0; i+len("secret") <= len(s); i++ {
		if s[i:i+len("secret")] == "secret" {
			return true
		}
	}
	return false
}
