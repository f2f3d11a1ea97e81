package muster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A session whose keepalives never get through is lost by its local
// deadline, with the last failure as the cause; transient failures before
// that are retried with backoff, not given up on.
func TestSessionLostWhenKeepalivesFail(t *testing.T) {
	var keepalives atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/sessions":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"session_id":"0123456789abcdef0123456789abcdef","holder_incarnation":"inc","owner_id":"w","ttl_ms":1000,"expires_at":"2026-01-01T00:00:01Z","epoch":"e1"}`))
		default:
			keepalives.Add(1)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"Service Unavailable","status":503,"code":"unavailable"}`))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, "")
	start := time.Now()
	s, err := c.NewSession(context.Background(), "w", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the session was not lost")
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 1500*time.Millisecond {
		t.Fatalf("lost after %v, want about the TTL (1s)", d)
	}
	if !errors.Is(s.Err(), ErrSessionLost) || !errors.Is(s.Err(), ErrUnavailable) {
		t.Fatalf("err %v", s.Err())
	}
	if n := keepalives.Load(); n < 3 {
		t.Fatalf("only %d keepalive attempts before giving up", n)
	}
}
