package handlers

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
)

const corsOrigin = "https://dash.example.com"

// corsServer is a broker handler with CORS for corsOrigin.
func corsServer(t *testing.T, origins ...string) http.Handler {
	t.Helper()
	return newTestServer(t, func(o *Options) { o.CORSAllowedOrigins = origins })
}

func corsDo(h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestCORSOffByDefault(t *testing.T) {
	h := corsServer(t)
	w := corsDo(h, http.MethodGet, "/healthz", map[string]string{"Origin": corsOrigin})
	if w.Code != http.StatusOK {
		t.Fatalf("GET /healthz: %d", w.Code)
	}
	for k := range w.Header() {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("CORS off, yet the answer has %s: %q", k, w.Header().Get(k))
		}
	}
	w = corsDo(h, http.MethodOptions, "/v1/leases", map[string]string{"Origin": corsOrigin, "Access-Control-Request-Method": "GET"})
	if w.Code < 400 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight with CORS off: %d %q, want a refusal without CORS headers", w.Code, w.Header())
	}
}

func TestCORSActualRequest(t *testing.T) {
	h := corsServer(t, corsOrigin, "http://127.0.0.1:8080")
	for _, tt := range []struct {
		name, origin, wantAllow string
	}{
		{"Allowed", corsOrigin, corsOrigin},
		{"OtherAllowed", "http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"NotAllowed", "https://evil.example.com", ""},
		{"NoOrigin", "", ""},
		{"CaseMatters", "https://DASH.example.com", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.origin != "" {
				hdr["Origin"] = tt.origin
			}
			w := corsDo(h, http.MethodGet, "/v1/leases?selector="+url.QueryEscape("lease://acme/**"), hdr)
			if w.Code != http.StatusOK {
				t.Fatalf("GET /v1/leases: %d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != tt.wantAllow {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tt.wantAllow)
			}
			wantExpose := ""
			if tt.wantAllow != "" {
				wantExpose = "Muster-Epoch"
			}
			if got := w.Header().Get("Access-Control-Expose-Headers"); got != wantExpose {
				t.Errorf("Access-Control-Expose-Headers %q, want %q", got, wantExpose)
			}
			if got := w.Header().Get("Access-Control-Allow-Credentials"); got != "" {
				t.Errorf("Access-Control-Allow-Credentials %q, want none", got)
			}
			if !strings.Contains(strings.Join(w.Header().Values("Vary"), ","), "Origin") {
				t.Errorf("Vary %q lacks Origin", w.Header().Values("Vary"))
			}
		})
	}
}

func TestCORSPreflight(t *testing.T) {
	h := corsServer(t, corsOrigin)
	for _, tt := range []struct {
		name, origin, method, headers string
		ok                            bool
	}{
		{"Watch", corsOrigin, "GET", "authorization", true},
		{"Acquire", corsOrigin, "POST", "Authorization, Content-Type, Muster-Session", true},
		{"Release", corsOrigin, "POST", "authorization,content-type", true},
		{"Forget", corsOrigin, "DELETE", "Authorization", true},
		{"NoHeaders", corsOrigin, "GET", "", true},
		{"OtherOrigin", "https://evil.example.com", "GET", "authorization", false},
		{"NoOrigin", "", "GET", "authorization", false},
		{"MethodNotInAPI", corsOrigin, "PUT", "authorization", false},
		{"HeaderNotInAPI", corsOrigin, "GET", "authorization, x-forwarded-for", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Access-Control-Request-Method": tt.method}
			if tt.origin != "" {
				hdr["Origin"] = tt.origin
			}
			if tt.headers != "" {
				hdr["Access-Control-Request-Headers"] = tt.headers
			}
			w := corsDo(h, http.MethodOptions, "/v1/leases/acme/r/doc-1/acquire", hdr)
			allow := w.Header().Get("Access-Control-Allow-Origin")
			if !tt.ok {
				if w.Code != http.StatusForbidden || allow != "" || !strings.Contains(w.Body.String(), `"forbidden"`) {
					t.Errorf("refused preflight: %d allow=%q body %s, want 403 forbidden without CORS headers", w.Code, allow, w.Body)
				}
				return
			}
			if w.Code != http.StatusNoContent || allow != tt.origin {
				t.Fatalf("preflight: %d allow=%q, want 204 for %s", w.Code, allow, tt.origin)
			}
			for k, want := range map[string]string{
				"Access-Control-Allow-Methods": "GET, HEAD, POST, DELETE",
				"Access-Control-Allow-Headers": "Authorization, Content-Type, Muster-Session",
				"Access-Control-Max-Age":       "600",
			} {
				if got := w.Header().Get(k); got != want {
					t.Errorf("%s %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestCORSRefusesBadOrigins(t *testing.T) {
	for _, o := range []string{"*", "https://*.example.com", "https://a.example/", "a.example", "null", "ftp://a.example", "https://A.example", "http://a.example:0", "http://u@a.example", "http://a.example?x", "http://a.example#x", "http://:80", "http://a.example:"} {
		if _, err := newCORSTable([]string{o}); err == nil {
			t.Errorf("newCORSTable accepted %q", o)
		}
	}
	for _, o := range []string{"http://127.0.0.1:8080", "https://dash.example.com", "http://[::1]:3000", "http://localhost"} {
		if err := CheckOrigin(o); err != nil {
			t.Errorf("CheckOrigin(%q): %v", o, err)
		}
	}
}

// FuzzCheckOrigin: an origin CheckOrigin accepts is one a browser could send
// and the middleware compares byte for byte: it parses back to itself as
// scheme://host with nothing else.
func FuzzCheckOrigin(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080", "https://a.example", "*", "http://a.example/", "null", "http://[::1]:1", "http://a.example:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, o string) {
		if CheckOrigin(o) != nil {
			return
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			t.Fatalf("accepted %q: %+v %v", o, u, err)
		}
		if got := u.Scheme + "://" + u.Host; got != o || strings.ContainsAny(o, "* \t\r\n") {
			t.Fatalf("accepted %q, which serializes as %q", o, got)
		}
	})
}

// newTestServer is a Server over a real core and a bbolt fleet store in a
// temporary directory, in dev mode; opt adjusts its Options.
func newTestServer(t *testing.T, opt func(*Options)) http.Handler {
	t.Helper()
	b := core.NewBroker(core.Config{Epoch: "test-epoch", IncarnationKey: make([]byte, 32)}, nil, nil)
	t.Cleanup(b.Close)
	store, err := fleetstore.OpenBolt(filepath.Join(t.TempDir(), "fleet.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	o := Options{
		Broker: b, Auth: NewAuthenticator(nil), Metrics: NewMetrics(b), Fleet: fleetstore.New(store),
		CursorMaster: make([]byte, 32), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	opt(&o)
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
