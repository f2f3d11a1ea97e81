// Package swaggerui serves Swagger UI (npm swagger-ui-dist, embedded in the
// binary) as Muster's API explorer. Nothing is fetched from the internet:
// every script, stylesheet and icon comes from this binary, and the page's
// Content-Security-Policy allows only the server's own origin.
//
// The files under dist/ are taken unchanged from swagger-ui-dist; refresh
// them with update.sh (the version is in dist/VERSION). The page itself
// (web/index.html), its styles and the script that starts Swagger UI are
// Muster's own and live under web/.
package swaggerui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/handlers/pagesec"
)

// MountPath is where the broker mounts Handler. The handler also works when
// the prefix has been stripped (http.StripPrefix) before it is called.
const MountPath = "/docs"

//go:embed dist/swagger-ui-bundle.js dist/swagger-ui.css
//go:embed dist/favicon-16x16.png dist/favicon-32x32.png
//go:embed dist/LICENSE dist/NOTICE dist/swagger-ui-bundle.js.LICENSE.txt
//go:embed dist/VERSION dist/SHA256SUMS
var distFS embed.FS

//go:embed web/index.html web/docs.css web/swagger-initializer.js
var webFS embed.FS

// Version is the swagger-ui-dist release embedded in this package.
func Version() string {
	b, err := distFS.ReadFile("dist/VERSION")
	if err != nil {
		panic("swaggerui: dist/VERSION missing from the embedded files")
	}
	return strings.TrimSpace(string(b))
}

// Cache lifetimes. Asset URLs written into the index carry ?v=<tag>, where
// tag is a digest of all embedded files, so a request that names the current
// tag may be cached for good; other asset requests get a day, and the index
// (which holds the spec URL and the tag) is revalidated on every load.
const (
	cacheImmutable = "public, max-age=31536000, immutable"
	cacheAsset     = "public, max-age=86400"
	cacheIndex     = "no-cache"
)

// asset is one file served under MountPath.
type asset struct {
	name        string
	body        []byte
	contentType string
	etag        string

	gzOnce sync.Once
	gz     []byte // nil when compressing does not pay
	gzEtag string
}

// gzipped returns the gzip encoding of a text asset, computed once.
func (a *asset) gzipped() []byte {
	a.gzOnce.Do(func() {
		if !compressible(a.contentType) || len(a.body) < 1024 {
			return
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(a.body)
		if err := zw.Close(); err != nil {
			return
		}
		if buf.Len() >= len(a.body) {
			return
		}
		a.gz = buf.Bytes()
		a.gzEtag = strings.TrimSuffix(a.etag, `"`) + `-gz"`
	})
	return a.gz
}

func compressible(contentType string) bool {
	return strings.HasPrefix(contentType, "text/") ||
		strings.HasPrefix(contentType, "application/javascript")
}

// contentTypes maps the extensions of the embedded files; files without an
// extension (LICENSE, NOTICE, VERSION, SHA256SUMS) are plain text.
var contentTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".html": "text/html; charset=utf-8",
	".txt":  "text/plain; charset=utf-8",
	"":      "text/plain; charset=utf-8",
}

func contentTypeFor(name string) string {
	ext := path.Ext(name)
	if strings.HasPrefix(name, "LICENSE") || name == "NOTICE" || name == "VERSION" || name == "SHA256SUMS" {
		ext = ""
	}
	if ct, ok := contentTypes[ext]; ok {
		return ct
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

func newAsset(name string, body []byte) *asset {
	sum := sha256.Sum256(body)
	return &asset{
		name:        name,
		body:        body,
		contentType: contentTypeFor(name),
		etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
	}
}

// static holds the embedded files by the name they are served under, and the
// tag (digest of all of them) that index.html appends to their URLs.
var static = sync.OnceValues(func() (map[string]*asset, string) {
	files := map[string]*asset{}
	add := func(fsys embed.FS, dir string) {
		entries, err := fs.ReadDir(fsys, dir)
		if err != nil {
			panic("swaggerui: " + err.Error())
		}
		for _, e := range entries {
			if e.IsDir() || e.Name() == "index.html" {
				continue
			}
			b, err := fsys.ReadFile(dir + "/" + e.Name())
			if err != nil {
				panic("swaggerui: " + err.Error())
			}
			files[e.Name()] = newAsset(e.Name(), b)
		}
	}
	add(distFS, "dist")
	add(webFS, "web")

	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%s\x00", n, files[n].etag)
	}
	return files, hex.EncodeToString(h.Sum(nil))[:12]
})

var indexTemplate = template.Must(template.ParseFS(webFS, "web/index.html"))

// handler serves the index page and the embedded files.
type handler struct {
	files map[string]*asset
	tag   string
	index *asset
	csp   string
}

// Handler returns the Swagger UI handler to mount at MountPath ("/docs").
// It serves:
//
//	/docs             redirect to docs/ (relative asset URLs need the slash)
//	/docs/            the page, which loads the spec from specURL
//	/docs/index.html  the same page
//	/docs/<file>      the embedded scripts, stylesheets, icons and licenses
//
// specURL is what Swagger UI fetches, normally "../openapi.yaml": relative to
// the page, so that the page works under any prefix a reverse proxy strips
// (/muster/docs/ loads /muster/openapi.yaml). A relative or absolute path is
// fetched from the broker's own origin; for an
// absolute URL that origin is added to the page's connect-src. Handler panics
// if specURL is empty or not a usable http(s) URL, as that is a wiring error.
//
// Only GET and HEAD are allowed. Every response carries the
// Content-Security-Policy, X-Content-Type-Options: nosniff and cache headers.
func Handler(specURL string) http.Handler {
	specOrigin, err := checkSpecURL(specURL)
	if err != nil {
		panic("swaggerui: " + err.Error())
	}
	files, tag := static()

	var buf bytes.Buffer
	if err := indexTemplate.Execute(&buf, struct{ SpecURL, Tag string }{specURL, tag}); err != nil {
		panic("swaggerui: rendering index.html: " + err.Error())
	}
	return &handler{
		files: files,
		tag:   tag,
		index: newAsset("index.html", buf.Bytes()),
		csp:   contentSecurityPolicy(specOrigin),
	}
}

// checkSpecURL accepts a path (relative or absolute) or an absolute http(s)
// URL, and returns the origin of the latter ("" for a path).
func checkSpecURL(specURL string) (origin string, err error) {
	if strings.TrimSpace(specURL) == "" {
		return "", fmt.Errorf("empty spec URL")
	}
	u, err := url.Parse(specURL)
	if err != nil {
		return "", fmt.Errorf("spec URL %q: %w", specURL, err)
	}
	switch {
	case u.Scheme == "" && u.Host == "":
		return "", nil
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		return u.Scheme + "://" + u.Host, nil
	default:
		return "", fmt.Errorf("spec URL %q: want a path or an http(s) URL", specURL)
	}
}

// contentSecurityPolicy allows the page to load only from its own origin.
//   - No 'unsafe-inline' anywhere: the start-up script is a file, and
//     Swagger UI sets element styles through the CSSOM (React style props),
//     which style-src does not govern; tests/browser fails on any violation.
//   - img-src data: for the icons inlined in swagger-ui.css; blob: for
//     image responses that "Try it out" displays.
//   - connect-src 'self' is where the spec and "Try it out" requests go.
func contentSecurityPolicy(specOrigin string) string {
	connect := "'self'"
	if specOrigin != "" {
		connect += " " + specOrigin
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data: blob:",
		"font-src 'self'",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
	}, "; ")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !pagesec.Begin(w, r, h.csp) {
		return
	}
	hdr := w.Header()

	rest, ok := strings.CutPrefix(r.URL.Path, MountPath)
	if !ok {
		rest = r.URL.Path // mounted behind http.StripPrefix(MountPath, ...)
	}
	switch {
	case rest == "":
		h.redirectToSlash(w, r)
		return
	case rest == "/" || rest == "/index.html":
		h.serve(w, r, h.index, cacheIndex)
		return
	}

	name, ok := strings.CutPrefix(rest, "/")
	a := h.files[name]
	if !ok || a == nil || strings.Contains(name, "/") {
		hdr.Set("Cache-Control", "no-store")
		http.NotFound(w, r)
		return
	}
	cc := cacheAsset
	if r.URL.Query().Get("v") == h.tag {
		cc = cacheImmutable
	}
	h.serve(w, r, a, cc)
}

// redirectToSlash sends /docs to /docs/, keeping the query. The Location is
// relative ("docs/"), the last segment of the request path with a slash, so
// that it is right whatever prefix a reverse proxy or http.StripPrefix took
// off before this handler: the browser resolves it against the URL it asked
// for (/muster/docs gives /muster/docs/). http.Redirect would make it
// absolute from the path this handler sees, so the header is written here.
func (h *handler) redirectToSlash(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	redirectRelative(w, r, path.Base(MountPath)+"/")
}

// redirectRelative answers 301 with the relative Location target (plus the
// request's query) and a short HTML body, as http.Redirect does.
func redirectRelative(w http.ResponseWriter, r *http.Request, target string) {
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", target)
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	w.WriteHeader(http.StatusMovedPermanently)
	if r.Method == http.MethodGet {
		fmt.Fprintf(w, "<a href=\"%s\">Moved Permanently</a>.\n", template.HTMLEscapeString(target))
	}
}

// serve writes one asset, gzipped when the client accepts it, with ETag
// revalidation (and Range, HEAD) handled by http.ServeContent.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, a *asset, cacheControl string) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", cacheControl)

	body, etag := a.body, a.etag
	if a.gzipped() != nil {
		hdr.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = a.gz, a.gzEtag
			hdr.Set("Content-Encoding", "gzip")
		}
	}
	hdr.Set("ETag", etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether Accept-Encoding lists gzip (or *) with a
// non-zero quality.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.TrimSpace(coding)
			if !strings.EqualFold(coding, "gzip") && coding != "*" {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = f
					}
				}
			}
			return q > 0
		}
	}
	return false
}
