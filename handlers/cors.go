package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/musterhq/muster"
)

// CORS: cross-origin access for pages served elsewhere than the broker.
//
// Off by default: with no allowed origins the broker sends no CORS header at
// all, and browsers keep other origins' pages from reading its answers.
// With allowed origins (exact "scheme://host[:port]" strings, no wildcard):
//
//   - an actual request whose Origin is allowed gets
//     Access-Control-Allow-Origin: <that origin> and
//     Access-Control-Expose-Headers: Muster-Epoch;
//   - a preflight (OPTIONS with Access-Control-Request-Method) from an
//     allowed origin, for one of the API's methods and only the request
//     headers the API reads, is answered 204 with the allowed methods and
//     headers and a max age; any other preflight is answered 403 forbidden
//     without CORS headers, so the browser refuses the request;
//   - every answer carries Vary: Origin, so a cache never hands one origin's
//     answer to another.
//
// Access-Control-Allow-Credentials is never sent: the API takes its bearer
// token in the Authorization header (or access_token on a watch), not in
// cookies, so no page needs the browser to attach credentials of its own.
const (
	corsMethods = "GET, HEAD, POST, DELETE"
	corsHeaders = "Authorization, Content-Type, Muster-Session"
	corsExpose  = "Muster-Epoch"
	corsMaxAge  = 600 // seconds a browser may cache a preflight answer
)

// corsAllowedHeaders are the request headers a preflight may ask for, in
// lower case (the header names the API reads).
var corsAllowedHeaders = map[string]bool{
	"authorization": true, "content-type": true, "muster-session": true,
}

// corsAllowedMethods are the methods of the API's operations.
var corsAllowedMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodDelete: true,
}

// CheckOrigin reports whether o is an origin CORS may allow: an http or
// https scheme, a host, an optional port, and nothing else (no path, query,
// fragment, user info or wildcard), in its serialized form (lower case, as
// browsers send it in the Origin header). The error says what is wrong.
func CheckOrigin(o string) error {
	if o == "" {
		return fmt.Errorf("empty origin")
	}
	if strings.Contains(o, "*") {
		return fmt.Errorf("origin %q: wildcards are not allowed; list each origin exactly", o)
	}
	u, err := url.Parse(o)
	if err != nil {
		return fmt.Errorf("origin %q: not a URL", o)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("origin %q: want http://host[:port] or https://host[:port]", o)
	}
	if u.Host == "" || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("origin %q: want scheme://host[:port] and nothing else", o)
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#") {
		return fmt.Errorf("origin %q: an origin has no path, query or fragment (not even a trailing /)", o)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "0") {
			return fmt.Errorf("origin %q: port must be 1..65535", o)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("origin %q: empty port", o)
	}
	if o != strings.ToLower(o) {
		return fmt.Errorf("origin %q: must be lower case, as browsers send it", o)
	}
	return nil
}

// corsTable is one immutable set of allowed origins.
type corsTable struct{ allowed map[string]bool }

// newCORSTable checks origins (CheckOrigin); it returns nil, CORS off, for
// none.
func newCORSTable(origins []string) (*corsTable, error) {
	if len(origins) == 0 {
		return nil, nil
	}
	t := &corsTable{allowed: make(map[string]bool, len(origins))}
	for _, o := range origins {
		if err := CheckOrigin(o); err != nil {
			return nil, fmt.Errorf("handlers: cors: %w", err)
		}
		t.allowed[o] = true
	}
	return t, nil
}

// corsGate is the CORS middleware. Its table is replaced whole on a
// configuration reload (SetCORSOrigins) and read through an atomic pointer,
// without a lock; a nil table is CORS off, and then the middleware adds
// nothing to any answer.
type corsGate struct{ table atomic.Pointer[corsTable] }

func (g *corsGate) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := g.table.Load()
		if t == nil {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !t.allowed[origin] || !preflightOK(r) {
				writeProblem(w, muster.CodeForbidden, "CORS preflight refused: the origin, method or a request header is not allowed")
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if t.allowed[origin] {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExpose)
		}
		next.ServeHTTP(w, r)
	})
}

// SetCORSOrigins puts origins in force for every request from now on
// (none: CORS off). A bad origin changes nothing and is returned.
func (s *Server) SetCORSOrigins(origins []string) error {
	t, err := newCORSTable(origins)
	if err != nil {
		return err
	}
	s.cors.table.Store(t)
	return nil
}

// preflightOK reports whether the requested method and headers are ones the
// API takes.
func preflightOK(r *http.Request) bool {
	if !corsAllowedMethods[r.Header.Get("Access-Control-Request-Method")] {
		return false
	}
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "" && !corsAllowedHeaders[name] {
				return false
			}
		}
	}
	return true
}
