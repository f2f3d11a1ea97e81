package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveStoreURL(t *testing.T) {
	dir := t.TempDir()
	file := func(body string) string {
		p := filepath.Join(dir, "store-"+strings.ReplaceAll(body, "/", "_"))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, flag, file, env string
		want, err             string
	}{
		{"Nothing", "", "", "", "", ""},
		{"Flag", "postgres://a", "", "postgres://env", "postgres://a", ""},
		{"File", "", file("  postgres://u:secret@h/db  \nignored\n"), "postgres://env", "postgres://u:secret@h/db", ""},
		{"Env", "", "", "postgres://env", "postgres://env", ""},
		{"FlagAndFile", "postgres://a", file("postgres://b"), "", "", "give one"},
		{"EmptyFile", "", file("\n"), "", "", "first line is empty"},
		{"NoFile", "", filepath.Join(dir, "absent"), "", "", "--store-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvStore, tc.env)
			m := &Main{StoreURL: tc.flag, StoreFile: tc.file}
			err := m.resolveStoreURL()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || m.StoreURL != tc.want {
				t.Fatalf("StoreURL %q, %v; want %q", m.StoreURL, err, tc.want)
			}
		})
	}
}
