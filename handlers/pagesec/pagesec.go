// Package pagesec holds the answer headers shared by the broker's two
// browser pages, /docs/ (Swagger UI) and /ui/ (the dashboard), so that the
// two cannot drift apart.
package pagesec

import "net/http"

// Begin sets the headers every answer of a page carries: the page's
// Content-Security-Policy, nosniff, no-referrer and a same-origin opener
// policy. It then refuses every method but GET and HEAD with 405 and an
// Allow header, and reports whether the caller should go on serving.
func Begin(w http.ResponseWriter, r *http.Request, csp string) bool {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	return true
}
