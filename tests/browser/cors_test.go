package browser

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// crossOriginPage is a page that another origin than the broker serves: it
// loads the SDK's browser bundle (the one /ui/ embeds) and, when the test
// calls watch(), observes a selector on the broker's URL, keeping the view
// and the epoch the client read (from the exposed Muster-Epoch header) on
// window.
const crossOriginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>elsewhere</title>
<script type="module" src="/page.js"></script></head>
<body><p id="view">no view yet</p></body></html>`

const crossOriginScript = `import { MusterClient } from "./muster.js";
window.watch = (broker, token, selector) => {
  const c = new MusterClient(broker, { token });
  const o = c.observe(selector);
  o.onChange((v) => {
    window.__view = { ready: v.ready, epoch: v.epoch, routes: v.items.map((i) => i.route), clientEpoch: c.epoch,
      error: o.error ? String(o.error.message) : "" };
    document.getElementById("view").textContent = JSON.stringify(window.__view);
  });
  o.ready.catch(() => {});
};
window.watchReady = true;
`

// crossOriginServer serves the page, its script and the SDK bundle.
func crossOriginServer(t *testing.T) *httptest.Server {
	t.Helper()
	sdk, err := os.ReadFile("../../handlers/ui/dist/muster.js")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	serve := func(path, ctype, body string) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", ctype)
			_, _ = w.Write([]byte(body))
		})
	}
	serve("/{$}", "text/html; charset=utf-8", crossOriginPage)
	serve("/page.js", "text/javascript", crossOriginScript)
	serve("/muster.js", "text/javascript", string(sdk))
	serve("/favicon.ico", "image/x-icon", "")
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestUICrossOriginStreams: a page on another origin streams the broker's
// leases through CORS (cors.allowed_origins), reads the exposed
// Muster-Epoch; a page on an origin that is not allowed cannot.
func TestUICrossOriginStreams(t *testing.T) {
	if strings.EqualFold(os.Getenv(EnvSwitch), "off") {
		t.Skipf("%s=off: real-browser test skipped", EnvSwitch)
	}
	allowed := crossOriginServer(t)
	other := crossOriginServer(t)
	b := startUIBroker(t, allowed.URL)
	if allowed.URL == b.URL() || other.URL == b.URL() {
		t.Fatal("the pages must be on other origins than the broker")
	}

	watch := func(s *Session, page string) {
		s.Step(t, "opening "+page, 0, chromedp.Navigate(page+"/"))
		poll(t, s, "the page's script", 5*time.Second, `() => window.watchReady ? "loaded" : ""`)
		if _, err := chromedp.Run(s.Ctx, chromedp.Evaluate[any](`window.watch(`+jsString(b.URL())+`, `+jsString(uiToken)+`, "lease://acme/**")`)); err != nil {
			s.Fail(t, "calling watch: "+err.Error())
		}
	}

	t.Run("Allowed", func(t *testing.T) {
		s := Start(t, Options{})
		watch(s, allowed.URL)
		poll(t, s, "ready across origins", 10*time.Second, `(e) => window.__view?.ready && window.__view.epoch === e ? "ready" : ""`, b.Epoch)
		route := "lease://acme/renderers/cors-1"
		b.acquire("worker-cors", route, 30*time.Second)
		poll(t, s, "the acquired lease through the stream", time.Second, `(r) => window.__view?.ready && window.__view.routes.includes(r) ? "seen" : ""`, route)
		got, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`window.__view.clientEpoch`))
		if got != b.Epoch {
			t.Errorf("the client read Muster-Epoch %q, want %q (exposed through CORS)", got, b.Epoch)
		}
		for _, r := range s.Requests() {
			if strings.HasPrefix(r.URL, b.URL()) && r.Failed != "" {
				t.Errorf("a request to the broker failed: %s", r)
			}
		}
		checkUIClean(t, s)
	})

	t.Run("NotAllowed", func(t *testing.T) {
		s := Start(t, Options{})
		watch(s, other.URL)
		msg := poll(t, s, "a CORS failure", 10*time.Second, `() => window.__view && !window.__view.ready && window.__view.error ? window.__view.error : ""`)
		time.Sleep(500 * time.Millisecond)
		ready, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[bool](`!!window.__view?.ready`))
		if ready {
			t.Errorf("a page on %s, which is not allowed, got a ready view", other.URL)
		}
		t.Logf("the not-allowed page's error: %s", msg)
		var blocked bool
		for _, p := range s.Problems() {
			if strings.Contains(p, "CORS") {
				blocked = true
			}
		}
		if !blocked {
			t.Errorf("no CORS refusal reported by the browser; problems: %q", s.Problems())
		}
	})
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
