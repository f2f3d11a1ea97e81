package ui

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func get(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHandler(t *testing.T) {
	h := Handler()
	for _, tt := range []struct {
		name, method, path string
		status             int
		ctype, location    string
	}{
		{"Redirect", "GET", "/ui", 301, "", "ui/"},
		{"RedirectKeepsQuery", "GET", "/ui?selector=lease://acme/**", 301, "", "ui/?selector=lease://acme/**"},
		{"Page", "GET", "/ui/", 200, "text/html; charset=utf-8", ""},
		{"PageByName", "GET", "/ui/index.html", 200, "text/html; charset=utf-8", ""},
		{"App", "GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"SDK", "GET", "/ui/muster.js", 200, "text/javascript; charset=utf-8", ""},
		{"Style", "GET", "/ui/ui.css", 200, "text/css; charset=utf-8", ""},
		{"Icon", "HEAD", "/ui/icon.svg", 200, "image/svg+xml", ""},
		{"Missing", "GET", "/ui/nope.js", 404, "", ""},
		{"NoDirectories", "GET", "/ui/web/ui.css", 404, "", ""},
		{"NoTraversal", "GET", "/ui/../ui.go", 404, "", ""},
		{"Post", "POST", "/ui/", 405, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := get(h, tt.method, tt.path)
			if w.Code != tt.status {
				t.Fatalf("%s %s: %d, want %d", tt.method, tt.path, w.Code, tt.status)
			}
			if got := w.Header().Get("Content-Security-Policy"); got != contentSecurityPolicy {
				t.Errorf("CSP %q", got)
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no nosniff")
			}
			if tt.ctype != "" && w.Header().Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), tt.ctype)
			}
			if tt.location != "" && w.Header().Get("Location") != tt.location {
				t.Errorf("Location %q, want %q", w.Header().Get("Location"), tt.location)
			}
		})
	}
}

// The policy allows nothing inline and nothing from elsewhere.
func TestContentSecurityPolicyIsStrict(t *testing.T) {
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
		if strings.Contains(contentSecurityPolicy, bad) {
			t.Errorf("the CSP allows %q: %s", bad, contentSecurityPolicy)
		}
	}
}

// The page and its files reference nothing outside this origin, hold no
// inline script or style, and revalidate with their ETag.
func TestAssetsSelfContained(t *testing.T) {
	h := Handler()
	for _, name := range []string{"index.html", "app.js", "muster.js", "ui.css"} {
		w := get(h, "GET", "/ui/"+name)
		body := w.Body.String()
		for _, ref := range []string{"//cdn", "https://", "@import", "fonts.googleapis"} {
			if strings.Contains(body, ref) {
				t.Errorf("%s mentions %q", name, ref)
			}
		}
		if etag := w.Header().Get("ETag"); etag == "" {
			t.Errorf("%s: no ETag", name)
		} else if r := get(h, "GET", "/ui/"+name, "If-None-Match", etag); r.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", name, r.Code)
		}
	}
	page := get(h, "GET", "/ui/").Body.String()
	if strings.Contains(page, "<script>") || strings.Contains(page, "style=") || strings.Contains(page, "<style") {
		t.Error("index.html has an inline script or style")
	}
	// Inputs without a name: the form submitted without the script puts nothing in the URL.
	if strings.Contains(page, `name="token"`) || strings.Contains(page, `name="selector"`) {
		t.Error("a watch form input has a name: submitted without the script it would land in the URL")
	}
	// The embedded SDK is the one the build produced from clients/ts (check.sh compares the rest).
	disk, err := os.ReadFile("dist/muster.js")
	if err != nil {
		t.Fatal(err)
	}
	if get(h, "GET", "/ui/muster.js").Body.String() != string(disk) {
		t.Error("the embedded muster.js differs from dist/muster.js")
	}
}
