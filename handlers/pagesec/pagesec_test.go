package pagesec

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBegin(t *testing.T) {
	for _, tc := range []struct {
		method string
		goOn   bool
	}{{http.MethodGet, true}, {http.MethodHead, true}, {http.MethodPost, false}, {http.MethodDelete, false}} {
		w := httptest.NewRecorder()
		got := Begin(w, httptest.NewRequest(tc.method, "/ui/", nil), "default-src 'self'")
		if got != tc.goOn {
			t.Errorf("%s: Begin = %v, want %v", tc.method, got, tc.goOn)
		}
		h := w.Header()
		for k, want := range map[string]string{
			"Content-Security-Policy":    "default-src 'self'",
			"X-Content-Type-Options":     "nosniff",
			"Referrer-Policy":            "no-referrer",
			"Cross-Origin-Opener-Policy": "same-origin",
		} {
			if h.Get(k) != want {
				t.Errorf("%s: %s = %q, want %q", tc.method, k, h.Get(k), want)
			}
		}
		if !tc.goOn && (w.Code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD") {
			t.Errorf("%s: status %d, Allow %q; want 405 with Allow: GET, HEAD", tc.method, w.Code, h.Get("Allow"))
		}
		if tc.goOn && w.Code != http.StatusOK {
			t.Errorf("%s: Begin wrote status %d", tc.method, w.Code)
		}
	}
}
