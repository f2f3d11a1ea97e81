package handlers

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panicking handler answers a problem with code internal, logs the
// panic, and shows nothing of it to the caller.
func TestRecovererAnswersProblem(t *testing.T) {
	var logs strings.Builder
	s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil))}
	h := s.recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret-detail-7731")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/leases", nil))
	body, _ := io.ReadAll(w.Body)
	var p problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if w.Code != 500 || w.Header().Get("Content-Type") != "application/problem+json" || p.Code != "internal" {
		t.Fatalf("%d %q %s", w.Code, w.Header().Get("Content-Type"), body)
	}
	if strings.Contains(string(body), "secret-detail") {
		t.Fatal("the panic value reached the caller")
	}
	if !strings.Contains(logs.String(), "secret-detail-7731") {
		t.Fatal("the panic was not logged")
	}
}
