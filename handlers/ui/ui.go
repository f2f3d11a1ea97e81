// Package ui serves Muster's live dashboard at /ui/: the held leases under a
// selector, kept live by the TypeScript SDK's observer, with an event log,
// counters and a fleet's gap. Everything comes from this binary (go:embed):
// no CDN, no font or script from elsewhere, and the page's
// Content-Security-Policy allows only the broker's own origin, so it works
// offline and talks to no other host.
//
// web/ holds the page and its stylesheet; src/ the TypeScript; dist/ what
// build.sh builds from src/ and from the SDK (app.js and the SDK's browser
// bundle muster.js). dist/ is committed so that `go build` needs no Node;
// check.sh (run by make test) fails when it is stale.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/musterhq/muster/handlers/pagesec"
)

// MountPath is where the broker mounts Handler.
const MountPath = "/ui"

//go:embed web/index.html web/ui.css web/icon.svg dist/app.js dist/muster.js
var files embed.FS

// contentSecurityPolicy: only this origin, nothing inline. The scripts are
// files (no inline script, no eval), styles come from ui.css (the script
// sets no style attribute), and the API is called on the page's own origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

type asset struct {
	name, contentType, etag string
	body                    []byte
}

// handler serves the page and its files by name.
type handler struct{ assets map[string]*asset }

// Handler returns the dashboard's handler, to mount at MountPath:
//
//	/ui             redirect to ui/ (the page's relative URLs need the slash)
//	/ui/            the page (also /ui/index.html)
//	/ui/<file>      app.js, muster.js, ui.css, icon.svg
//
// Only GET and HEAD are allowed. Every answer carries the
// Content-Security-Policy, nosniff, no-referrer and Cache-Control: no-cache
// with an ETag (revalidated on each load: a new broker serves its own
// files). Every URL the page uses is relative to it: its files, and the API,
// which it calls at the directory above the page (/ui/'s parent), so that it
// works behind a reverse proxy that serves the broker under a prefix.
func Handler() http.Handler {
	h := &handler{assets: map[string]*asset{}}
	for _, dir := range []string{"web", "dist"} {
		entries, err := fs.ReadDir(files, dir)
		if err != nil {
			panic("ui: " + err.Error())
		}
		for _, e := range entries {
			b, err := files.ReadFile(dir + "/" + e.Name())
			if err != nil {
				panic("ui: " + err.Error())
			}
			sum := sha256.Sum256(b)
			h.assets[e.Name()] = &asset{name: e.Name(), body: b, contentType: contentTypes[path.Ext(e.Name())],
				etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		}
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !pagesec.Begin(w, r, contentSecurityPolicy) {
		return
	}
	hdr := w.Header()
	rest, ok := strings.CutPrefix(r.URL.Path, MountPath)
	if !ok {
		rest = r.URL.Path
	}
	switch rest {
	case "":
		// A relative Location ("ui/"), resolved by the browser against the
		// URL it asked for, stays right under any prefix a reverse proxy
		// strips (/muster/ui gives /muster/ui/); http.Redirect would make it
		// absolute from the path seen here.
		target := path.Base(MountPath) + "/"
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		hdr.Set("Cache-Control", "no-cache")
		hdr.Set("Location", target)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	case "/":
		rest = "/index.html"
	}
	a := h.assets[strings.TrimPrefix(rest, "/")]
	if a == nil || strings.Count(rest, "/") != 1 {
		hdr.Set("Cache-Control", "no-store")
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}
