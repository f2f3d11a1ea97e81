package handlers

import (
	"crypto/sha256"
	"net/http"
	"sync"
	"testing"

	"github.com/musterhq/muster/core"
)

func testToken(t *testing.T, name, secret, family, grant string) Token {
	t.Helper()
	g, err := core.ParseGrant(grant)
	if err != nil {
		t.Fatal(err)
	}
	return Token{Name: name, Hash: sha256.Sum256([]byte(secret)), Family: core.Family(family), Grants: core.Grants{g}}
}

// Replace swaps the whole table: the old secret is refused from then on,
// the new one is served, and a Caller handed out before keeps its grants.
func TestAuthenticatorReplace(t *testing.T) {
	old := testToken(t, "old", "s-old", "acme", "lease://acme/**#*")
	a := NewAuthenticator([]Token{old})
	before, ok := a.Authenticate("s-old")
	if !ok || before.Family != "acme" {
		t.Fatalf("old secret before the swap: %v %+v", ok, before)
	}
	a.Replace([]Token{testToken(t, "new", "s-new", "acme", "lease://acme/x/**#read")})
	for _, tt := range []struct {
		secret string
		ok     bool
	}{{"s-old", false}, {"s-new", true}, {"", false}} {
		if _, ok := a.Authenticate(tt.secret); ok != tt.ok {
			t.Errorf("Authenticate(%q) = %v, want %v", tt.secret, ok, tt.ok)
		}
	}
	sel, _ := core.ParseSelector("lease://acme/y/z")
	if !before.Grants.AllowsLease(sel, core.Write) {
		t.Error("a caller handed out before the swap lost its grants")
	}
	if a.DevMode() {
		t.Error("dev mode with tokens")
	}
}

// Requests racing a swap see one table or the other (run with -race).
func TestAuthenticatorReplaceConcurrent(t *testing.T) {
	tokA := testToken(t, "a", "sa", "fa", "lease://**#*")
	tokB := testToken(t, "b", "sb", "fb", "lease://**#*")
	a := NewAuthenticator([]Token{tokA})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ca, okA := a.Authenticate("sa")
				if okA && ca.Family != "fa" {
					t.Error("token a served with another family")
					return
				}
			}
		})
	}
	for i := range 1000 {
		if i%2 == 0 {
			a.Replace([]Token{tokB})
		} else {
			a.Replace([]Token{tokA, tokB})
		}
	}
	close(stop)
	wg.Wait()
}

// SetCORSOrigins turns CORS on, changes the origins and turns it off again
// on a running server; a bad origin changes nothing.
func TestCORSSetOrigins(t *testing.T) {
	h := corsServer(t)
	s := h.(*Server)
	allow := func() string {
		w := corsDo(h, http.MethodGet, "/healthz", map[string]string{"Origin": corsOrigin})
		return w.Header().Get("Access-Control-Allow-Origin")
	}
	if got := allow(); got != "" {
		t.Fatalf("CORS off, Access-Control-Allow-Origin %q", got)
	}
	if err := s.SetCORSOrigins([]string{corsOrigin}); err != nil {
		t.Fatal(err)
	}
	if got := allow(); got != corsOrigin {
		t.Fatalf("after SetCORSOrigins: %q", got)
	}
	if err := s.SetCORSOrigins([]string{"https://*.example.com"}); err == nil {
		t.Fatal("a wildcard origin was accepted")
	}
	if got := allow(); got != corsOrigin {
		t.Fatalf("a refused change changed the origins: %q", got)
	}
	if err := s.SetCORSOrigins(nil); err != nil {
		t.Fatal(err)
	}
	if got := allow(); got != "" {
		t.Fatalf("CORS turned off, Access-Control-Allow-Origin %q", got)
	}
}
