package handlers

import (
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// BenchmarkStackSmallPOST measures what every request pays before its
// handler runs: chi routing, bearer authentication against configured
// token hashes, body buffering and validation of a small JSON body, on the
// acquire route. The handler itself is trivial. hot: the fast path
// (hotbody.go), which decodes the body too; general: kin-openapi, as every
// other operation (and every request the fast path does not take).
func BenchmarkStackSmallPOST(b *testing.B) {
	b.Run("hot", func(b *testing.B) { benchStackSmallPOST(b, false) })
	b.Run("general", func(b *testing.B) { benchStackSmallPOST(b, true) })
}

func benchStackSmallPOST(b *testing.B, generalOnly bool) {
	spec, err := api.GetSpec()
	if err != nil {
		b.Fatal(err)
	}
	var tokens []Token
	for _, secret := range []string{"t1", "t2", "t3", "bench-token"} {
		g, _ := core.ParseGrants([]string{"lease://acme/**#*"})
		tokens = append(tokens, Token{Name: secret, Hash: sha256.Sum256([]byte(secret)), Family: "acme", Grants: g})
	}
	c, err := newContract(spec, NewAuthenticator(tokens), slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultBodyReadTimeout)
	if err != nil {
		b.Fatal(err)
	}
	c.generalOnly = generalOnly
	r := chi.NewRouter()
	r.With(c.middleware).Post("/v1/leases/{realm}/{area}/{resource}/acquire", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	const body = `{"session_id":"0123456789abcdef0123456789abcdef","ttl_ms":15000,"wait_ms":0}`
	b.ReportAllocs()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/leases/acme/renderers/document-123/acquire", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer bench-token")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
