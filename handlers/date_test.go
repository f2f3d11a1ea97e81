package handlers

import (
	"net/http"
	"testing"
	"time"
)

// TestDateHeader: answers carry the Date net/http would write (this
// second, in its format), and a Date the handler set is kept.
func TestDateHeader(t *testing.T) {
	s := benchServer(t)
	for _, target := range []string{"/healthz", "/v1/leases/a/b/c/acquire"} {
		before := time.Now().Truncate(time.Second)
		w := serve(s, "POST", target, `{}`)
		if target == "/healthz" {
			w = serve(s, "GET", target, "")
		}
		after := time.Now()
		d, err := http.ParseTime(w.Header().Get("Date"))
		if err != nil || d.Before(before) || d.After(after) || w.Header().Get("Date") != d.UTC().Format(http.TimeFormat) {
			t.Fatalf("%s (%d): Date %q (%v), want between %v and %v", target, w.Code, w.Header().Get("Date"), err, before, after)
		}
	}
	h := http.Header{"Date": {"Mon, 02 Jan 2006 15:04:05 GMT"}}
	stampDate(h)
	if h.Get("Date") != "Mon, 02 Jan 2006 15:04:05 GMT" {
		t.Fatalf("the handler's Date was replaced: %q", h.Get("Date"))
	}
}
