package swaggerui

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

const spec = "/openapi.yaml"

// wantFiles are the files served under /docs/ with their content types.
var wantFiles = map[string]string{
	"swagger-ui-bundle.js":             "text/javascript; charset=utf-8",
	"swagger-initializer.js":           "text/javascript; charset=utf-8",
	"swagger-ui.css":                   "text/css; charset=utf-8",
	"docs.css":                         "text/css; charset=utf-8",
	"favicon-16x16.png":                "image/png",
	"favicon-32x32.png":                "image/png",
	"LICENSE":                          "text/plain; charset=utf-8",
	"NOTICE":                           "text/plain; charset=utf-8",
	"swagger-ui-bundle.js.LICENSE.txt": "text/plain; charset=utf-8",
	"VERSION":                          "text/plain; charset=utf-8",
	"SHA256SUMS":                       "text/plain; charset=utf-8",
}

func do(t *testing.T, h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func checkSecurityHeaders(t *testing.T, name string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options = %q, want nosniff", name, got)
	}
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", name, csp, want)
		}
	}
	for _, bad := range []string{"unsafe-eval", "unsafe-inline", "http:", "https:", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("%s: Content-Security-Policy %q allows %q", name, csp, bad)
		}
	}
}

func TestEveryAssetServedWithItsType(t *testing.T) {
	h := Handler(spec)
	files, _ := static()
	if len(files) != len(wantFiles) {
		var names []string
		for n := range files {
			names = append(names, n)
		}
		t.Errorf("embedded files %q, want exactly the %d of wantFiles", names, len(wantFiles))
	}
	for name, ct := range wantFiles {
		rec := do(t, h, http.MethodGet, "/docs/"+name)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", name, rec.Code)
			continue
		}
		if got := rec.Header().Get("Content-Type"); got != ct {
			t.Errorf("%s: Content-Type %q, want %q", name, got, ct)
		}
		if rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s: encoded without Accept-Encoding", name)
		}
		if a := files[name]; a == nil || !bytes.Equal(rec.Body.Bytes(), a.body) {
			t.Errorf("%s: body differs from the embedded file", name)
		}
		if rec.Header().Get("ETag") == "" {
			t.Errorf("%s: no ETag", name)
		}
		if got := rec.Header().Get("Cache-Control"); got != cacheAsset {
			t.Errorf("%s: Cache-Control %q, want %q", name, got, cacheAsset)
		}
		checkSecurityHeaders(t, name, rec)
	}
}

func TestIndexPage(t *testing.T) {
	h := Handler(spec)
	var first string
	for _, target := range []string{"/docs/", "/docs/index.html", "/docs/?x=1"} {
		rec := do(t, h, http.MethodGet, target)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d", target, rec.Code)
		}
		if got := rec.Header().Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", target, got)
		}
		if got := rec.Header().Get("Cache-Control"); got != cacheIndex {
			t.Errorf("%s: Cache-Control %q, want %q", target, got, cacheIndex)
		}
		checkSecurityHeaders(t, target, rec)
		body := rec.Body.String()
		if first == "" {
			first = body
		} else if body != first {
			t.Errorf("%s: differs from /docs/", target)
		}
	}

	if !strings.Contains(first, `data-spec-url="/openapi.yaml"`) {
		t.Errorf("index does not carry the spec URL:\n%s", first)
	}
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+`).FindAllString(first, -1); len(m) > 0 {
		t.Errorf("index names external URLs %q:\n%s", m, first)
	}
	// No inline script or style: every <script> has a src, no <style>, no
	// style= or on*= attributes.
	if n, m := strings.Count(first, "<script"), strings.Count(first, "<script src="); n != m || n != 2 {
		t.Errorf("index has %d <script> elements, %d with src; want 2 with src", n, m)
	}
	if regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=`).MatchString(first) {
		t.Errorf("index has inline style or event handlers:\n%s", first)
	}
	// Every local reference resolves to a served file, with the cache tag.
	_, tag := static()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(first, -1)
	seen := map[string]bool{}
	for _, m := range refs {
		ref := m[1]
		if ref == spec {
			continue
		}
		name, query, _ := strings.Cut(ref, "?")
		seen[name] = true
		if query != "v="+tag {
			t.Errorf("reference %q lacks ?v=%s", ref, tag)
		}
		rec := do(t, h, http.MethodGet, "/docs/"+ref)
		if rec.Code != http.StatusOK {
			t.Errorf("reference %q: status %d", ref, rec.Code)
		}
		if got := rec.Header().Get("Cache-Control"); got != cacheImmutable {
			t.Errorf("reference %q: Cache-Control %q, want %q", ref, got, cacheImmutable)
		}
	}
	for _, want := range []string{"swagger-ui-bundle.js", "swagger-initializer.js", "swagger-ui.css", "docs.css", "favicon-32x32.png"} {
		if !seen[want] {
			t.Errorf("index does not load %s", want)
		}
	}
	if seen["swagger-ui-standalone-preset.js"] {
		t.Errorf("index loads the standalone preset, which is not embedded")
	}
}

func TestInitScriptConfig(t *testing.T) {
	rec := do(t, Handler(spec), http.MethodGet, "/docs/swagger-initializer.js")
	js := rec.Body.String()
	for _, want := range []string{
		`getAttribute("data-spec-url")`,
		"url: specURL,",
		"validatorUrl: null,",
		"persistAuthorization: true,",
		"tryItOutEnabled: false,",
		"queryConfigEnabled: false,",
		"SwaggerUIBundle({",
	} {
		if !strings.Contains(js, want) {
			t.Errorf("swagger-initializer.js lacks %q", want)
		}
	}
	if strings.Contains(js, "SwaggerUIStandalonePreset") {
		t.Errorf("swagger-initializer.js uses the standalone preset, which is not embedded")
	}
	if m := regexp.MustCompile(`https?://`).FindAllString(js, -1); len(m) > 0 {
		t.Errorf("swagger-initializer.js names URLs: %q", m)
	}
}

// The bundled CSS must fetch nothing: no @import, url() only with data:.
func TestStylesFetchNothing(t *testing.T) {
	for _, name := range []string{"swagger-ui.css", "docs.css"} {
		css := do(t, Handler(spec), http.MethodGet, "/docs/"+name).Body.String()
		if strings.Contains(css, "@import") {
			t.Errorf("%s has @import", name)
		}
		for _, m := range regexp.MustCompile(`url\(\s*['"]?([^'")]*)`).FindAllStringSubmatch(css, -1) {
			if !strings.HasPrefix(m[1], "data:") {
				t.Errorf("%s loads url(%s)", name, m[1])
			}
		}
	}
}

func TestRedirectToSlash(t *testing.T) {
	h := Handler(spec)
	for _, tc := range []struct {
		handler       http.Handler
		target, where string
	}{
		{h, "/docs", "docs/"},
		{h, "/docs?deep=1", "docs/?deep=1"},
		{http.StripPrefix("/docs", h), "/docs", "docs/"},
		{http.StripPrefix("/api/docs", h), "/api/docs", "docs/"},
	} {
		rec := do(t, tc.handler, http.MethodGet, tc.target)
		if rec.Code != http.StatusMovedPermanently {
			t.Errorf("%s: status %d, want 301", tc.target, rec.Code)
		}
		if got := rec.Header().Get("Location"); got != tc.where {
			t.Errorf("%s: Location %q, want %q", tc.target, got, tc.where)
		}
	}
}

func TestStripPrefixMount(t *testing.T) {
	h := http.StripPrefix("/docs", Handler(spec))
	for _, target := range []string{"/docs/", "/docs/swagger-ui.css"} {
		if rec := do(t, h, http.MethodGet, target); rec.Code != http.StatusOK {
			t.Errorf("%s behind StripPrefix: status %d", target, rec.Code)
		}
	}
}

func TestUnknownAsset404(t *testing.T) {
	h := Handler(spec)
	for _, target := range []string{
		"/docs/nope.js",
		"/docs/swagger-ui-bundle.js.map",
		"/docs/swagger-ui-standalone-preset.js",
		"/docs/oauth2-redirect.html",
		"/docs/dist/swagger-ui.css",
		"/docs/web/index.html",
		"/docs/swagger-ui.css/",
		"/docs/../go.mod",
		"/docs/%2e%2e/go.mod",
		"/docsx",
	} {
		rec := do(t, h, http.MethodGet, target)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", target, rec.Code)
		}
		checkSecurityHeaders(t, target, rec)
	}
}

func TestMethods(t *testing.T) {
	h := Handler(spec)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
		rec := do(t, h, m, "/docs/")
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", m, rec.Code)
		}
		if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
			t.Errorf("%s: Allow %q", m, got)
		}
	}
	rec := do(t, h, http.MethodHead, "/docs/swagger-ui.css")
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != wantFiles["swagger-ui.css"] {
		t.Errorf("HEAD: status %d, %d body bytes, type %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"))
	}
}

func TestGzip(t *testing.T) {
	h := Handler(spec)
	files, _ := static()
	for _, name := range []string{"swagger-ui-bundle.js", "swagger-ui.css"} {
		rec := do(t, h, http.MethodGet, "/docs/"+name, "Accept-Encoding", "br, gzip;q=0.8")
		if rec.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: not gzipped", name)
		}
		if !strings.Contains(rec.Header().Get("Vary"), "Accept-Encoding") {
			t.Errorf("%s: no Vary: Accept-Encoding", name)
		}
		if rec.Header().Get("ETag") == files[name].etag {
			t.Errorf("%s: gzip and identity share an ETag", name)
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(plain, files[name].body) {
			t.Errorf("%s: gzip body does not decode to the file (%v)", name, err)
		}
	}
	for _, ae := range []string{"gzip;q=0", "identity", "br"} {
		rec := do(t, h, http.MethodGet, "/docs/swagger-ui.css", "Accept-Encoding", ae)
		if rec.Header().Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: got Content-Encoding %q", ae, rec.Header().Get("Content-Encoding"))
		}
	}
	// Icons are not worth compressing.
	rec := do(t, h, http.MethodGet, "/docs/favicon-32x32.png", "Accept-Encoding", "gzip")
	if rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("favicon gzipped")
	}
}

func TestConditionalGet(t *testing.T) {
	h := Handler(spec)
	for _, target := range []string{"/docs/", "/docs/swagger-ui-bundle.js"} {
		for _, ae := range []string{"", "gzip"} {
			first := do(t, h, http.MethodGet, target, "Accept-Encoding", ae)
			etag := first.Header().Get("ETag")
			again := do(t, h, http.MethodGet, target, "Accept-Encoding", ae, "If-None-Match", etag)
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("%s (%q) with If-None-Match %s: status %d, %d bytes", target, ae, etag, again.Code, again.Body.Len())
			}
		}
	}
}

func TestSpecURL(t *testing.T) {
	rec := do(t, Handler("https://api.example.test:8443/v1/openapi.yaml"), http.MethodGet, "/docs/")
	if !strings.Contains(rec.Body.String(), `data-spec-url="https://api.example.test:8443/v1/openapi.yaml"`) {
		t.Errorf("absolute spec URL not in the index")
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://api.example.test:8443;") {
		t.Errorf("CSP %q does not allow the spec's origin", csp)
	}

	// Attribute escaping.
	rec = do(t, Handler(`/spec.yaml?a=1&b="x"`), http.MethodGet, "/docs/")
	if body := rec.Body.String(); strings.Contains(body, `"x"`) || !strings.Contains(body, "data-spec-url=\"/spec.yaml?a=1&amp;b=%22x%22\"") {
		t.Errorf("spec URL not escaped:\n%s", body)
	}

	for _, bad := range []string{"", "  ", "javascript:alert(1)", "ftp://host/spec", "https:///nohost", "http://[::1"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handler(%q) did not panic", bad)
				}
			}()
			Handler(bad)
		}()
	}
}

// The files under dist/ are those update.sh fetched: SHA256SUMS matches.
func TestDistMatchesChecksums(t *testing.T) {
	sums, err := distFS.ReadFile("dist/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("bad SHA256SUMS line %q", sc.Text())
		}
		b, err := distFS.ReadFile("dist/" + name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := sha256.Sum256(b)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s changed since update.sh fetched it; rerun handlers/swaggerui/update.sh", name)
		}
		n++
	}
	if n < 8 {
		t.Errorf("SHA256SUMS lists %d files", n)
	}
	if v := Version(); !regexp.MustCompile(`^5\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("Version() = %q, want 5.x.y", v)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for ae, want := range map[string]bool{
		"":                  false,
		"gzip":              true,
		"GZIP":              true,
		"deflate, gzip":     true,
		"gzip;q=0":          false,
		"gzip; q=0.000":     false,
		"gzip;q=0.5":        true,
		"*":                 true,
		"*;q=0":             false,
		"br;q=1, identity":  false,
		"gzip;q=1.0, br":    true,
		"x-gzip, identity":  false,
		" gzip ; q = 0.001": true,
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		if got := acceptsGzip(req); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", ae, got, want)
		}
	}
}
