package muster

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WithCAFile: the client trusts a broker whose certificate the file's CA
// signed, keeps HTTP/2, and New refuses a file without a certificate.
func TestWithCAFile(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "want HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Muster-Epoch", "e1")
		_, _ = w.Write([]byte(`{"route":"lease://a/b/c","held":false,"waiters":0}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	c, err := New(srv.URL, WithCAFile(ca))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "lease://a/b/c"); err != nil || c.Epoch() != "e1" {
		t.Fatalf("Get over TLS with the CA file: %v (epoch %q)", err, c.Epoch())
	}
	plain, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Get(t.Context(), "lease://a/b/c"); err == nil {
		t.Fatal("a client without the CA file trusted the test certificate")
	}

	empty := filepath.Join(dir, "empty.pem")
	_ = os.WriteFile(empty, []byte("not a certificate"), 0o600)
	for _, tt := range []struct{ name, path, want string }{
		{"Missing", filepath.Join(dir, "none.pem"), "CA file"},
		{"NoPEM", empty, "no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(srv.URL, WithCAFile(tt.path)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
