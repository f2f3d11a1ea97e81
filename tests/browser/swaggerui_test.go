package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/handlers/swaggerui"
)

// specs are the OpenAPI documents the browser tests serve at /openapi.yaml,
// one subtest each: a small placeholder that keeps the harness independent
// of the contract, and the broker's own openapi.yaml, so that a contract
// Swagger UI cannot render fails here. Each must contain the probe
// operation, which the test server answers without a broker.
var specs = []struct {
	name string
	load func() ([]byte, error)
}{
	{"placeholder", func() ([]byte, error) { return []byte(placeholderSpec), nil }},
	{"openapi.yaml", func() ([]byte, error) { return os.ReadFile("../../openapi.yaml") }},
}

// probe is the operation the test expands, tries out and executes.
var probe = struct {
	Method, Path string
	// Answer is what the test server replies; Marker must show up in the
	// rendered response.
	Answer, Marker string
}{
	Method: http.MethodGet,
	Path:   "/healthz",
	Answer: `{"status":"ok","checked_by":"muster-browser-test"}`,
	Marker: "muster-browser-test",
}

const placeholderSpec = `openapi: 3.0.3
info:
  title: Muster (placeholder spec for the browser test)
  version: 0.0.0-test
  description: Stands in for the broker's openapi.yaml in tests/browser.
tags:
  - name: operations
    description: Health and readiness of the broker.
paths:
  /healthz:
    get:
      tags: [operations]
      operationId: getHealthz
      summary: Liveness probe
      security: []
      responses:
        "200":
          description: The process is alive.
          content:
            application/json:
              schema:
                $ref: "#/components/schemas/Health"
  /readyz:
    get:
      tags: [operations]
      operationId: getReadyz
      summary: Readiness probe
      responses:
        "200":
          description: The broker is ready to serve.
          content:
            application/json:
              schema:
                $ref: "#/components/schemas/Health"
        "503":
          description: Not ready yet.
security:
  - bearerAuth: []
components:
  securitySchemes:
    bearerAuth:
      type: http
      scheme: bearer
      description: A token from the broker's config file.
  schemas:
    Health:
      type: object
      required: [status]
      properties:
        status:
          type: string
          example: ok
        checked_by:
          type: string
`

// docsServer serves what the broker serves for its API explorer: the spec,
// Swagger UI under /docs, and the probe operation. It counts the probe calls.
func docsServer(t *testing.T, spec []byte) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var probes []string

	mux := http.NewServeMux()
	docs := swaggerui.Handler("/openapi.yaml")
	mux.Handle(swaggerui.MountPath, docs)
	mux.Handle(swaggerui.MountPath+"/", docs)
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(spec)
	})
	mux.HandleFunc(probe.Method+" "+probe.Path, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		probes = append(probes, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintln(w, probe.Answer)
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), probes...)
	}
}

// TestSwaggerUIInChromium opens /docs in headless Chromium, waits for the
// operations to render, runs "Try it out" / "Execute" on the probe
// operation, and checks that the response is shown, that every request
// stayed on loopback, and that the page had no CSP violation, console error
// or exception.
func TestSwaggerUIInChromium(t *testing.T) {
	forEachSpec(t, testTryItOut)
}

// TestSwaggerUIAuthorizationPersists enters a bearer token in the Authorize
// dialog, reloads the page and checks that Swagger UI still holds it
// (persistAuthorization: true).
func TestSwaggerUIAuthorizationPersists(t *testing.T) {
	forEachSpec(t, testAuthorizationPersists)
}

func forEachSpec(t *testing.T, test func(t *testing.T, spec []byte)) {
	for _, sp := range specs {
		t.Run(sp.name, func(t *testing.T) {
			spec, err := sp.load()
			if err != nil {
				t.Fatalf("reading the spec: %v", err)
			}
			test(t, spec)
		})
	}
}

func testTryItOut(t *testing.T, spec []byte) {
	srv, probeCalls := docsServer(t, spec)
	s := Start(t, Options{Width: 1280, Height: 1024})
	ctx := s.Ctx

	// /docs redirects to /docs/, which must load.
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(srv.URL+swaggerui.MountPath))
	if err != nil {
		s.Fail(t, "opening /docs: "+err.Error())
	}
	if resp.Status != http.StatusOK || resp.URL != srv.URL+swaggerui.MountPath+"/" {
		t.Fatalf("opening /docs: got %d at %s, want 200 at %s/", resp.Status, resp.URL, swaggerui.MountPath)
	}

	summary := chromedp.CSS(fmt.Sprintf(`.opblock-summary-path[data-path=%q]`, probe.Path))
	s.Step(t, "waiting for the operation list", 0,
		chromedp.WaitVisible(chromedp.CSS(".information-container .title")),
		chromedp.WaitVisible(summary),
	)
	ops, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".opblock").length`))
	if err != nil || ops == 0 {
		s.Fail(t, fmt.Sprintf("operations rendered: %d (%v)", ops, err))
	}
	title, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".information-container .title")))
	t.Logf("rendered %q with %d operations", strings.Join(strings.Fields(title), " "), ops)

	s.Step(t, "expanding "+probe.Method+" "+probe.Path, 0,
		chromedp.Click(summary),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open")),
	)
	s.Step(t, `clicking "Try it out"`, 0,
		chromedp.Click(chromedp.CSS(".opblock.is-open .try-out__btn")),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open .btn.execute")),
	)
	s.Step(t, `clicking "Execute"`, 0,
		chromedp.Click(chromedp.CSS(".opblock.is-open .btn.execute")),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open .live-responses-table")),
	)
	// The body is rendered a moment after the table appears.
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	shown, err := chromedp.Run(pctx, chromedp.PollFunction[string](`(marker) => {
		const t = document.querySelector(".opblock.is-open .live-responses-table");
		return t && t.textContent.includes(marker) ? t.textContent : "";
	}`, chromedp.WithPollingArgs(probe.Marker), chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		s.Fail(t, fmt.Sprintf("waiting for the response body with %q in the page: %v", probe.Marker, err))
	}
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".opblock.is-open .live-responses-table tbody tr.response .response-col_status")))
	if err != nil || strings.TrimSpace(status) != "200" {
		t.Errorf("response status shown: %q (%v), want 200; table: %q", status, err, shown)
	}

	s.Screenshot(t, "swagger-ui.png")

	// The browser really called the test server.
	if got := probeCalls(); len(got) != 1 || got[0] != probe.Method+" "+probe.Path {
		t.Errorf("probe calls on the server: %q, want one %s %s", got, probe.Method, probe.Path)
	}

	reqs := s.Requests()
	t.Logf("requests:\n%s", lines(reqs))
	if ext := s.ExternalRequests(); len(ext) > 0 {
		t.Errorf("the page made requests off loopback:\n%s", lines(ext))
	}
	for _, want := range []string{
		srv.URL + swaggerui.MountPath + "/",
		srv.URL + "/openapi.yaml",
		srv.URL + probe.Path,
	} {
		if !requested(reqs, want) {
			t.Errorf("the page never requested %s", want)
		}
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.URL, "http") {
			continue
		}
		if r.Failed != "" || r.Status == 0 || r.Status >= 400 {
			t.Errorf("request did not succeed: %s", r)
		}
	}
	checkClean(t, s)
}

func testAuthorizationPersists(t *testing.T, spec []byte) {
	if !strings.Contains(strings.ToLower(string(spec)), "scheme: bearer") {
		t.Skip("the spec has no HTTP bearer security scheme")
	}
	srv, _ := docsServer(t, spec)
	s := Start(t, Options{})

	locked := chromedp.CSS(".auth-wrapper .btn.authorize.locked")
	s.Step(t, "opening /docs/", 0,
		chromedp.Navigate(srv.URL+swaggerui.MountPath+"/"),
		chromedp.WaitVisible(chromedp.CSS(".auth-wrapper .btn.authorize.unlocked")),
	)
	s.Step(t, "authorizing with a bearer token", 0,
		chromedp.Click(chromedp.CSS(".auth-wrapper .btn.authorize")),
		chromedp.WaitVisible(chromedp.ID("auth-bearer-value")),
		chromedp.SendKeys(chromedp.ID("auth-bearer-value"), "test-token-123"),
		chromedp.Click(chromedp.CSS(".modal-ux .btn.modal-btn.auth.authorize")),
		chromedp.WaitVisible(chromedp.CSS(".modal-ux .btn.modal-btn.auth.btn-done")),
		chromedp.Click(chromedp.CSS(".modal-ux .btn.modal-btn.auth.btn-done")),
		chromedp.WaitNotPresent(chromedp.CSS(".modal-ux")),
		chromedp.WaitVisible(locked),
	)
	s.Step(t, "reloading: the authorization must survive", 0,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(".opblock")),
		chromedp.WaitVisible(locked),
	)
	stored, err := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`localStorage.getItem("authorized") || ""`))
	if err != nil || !strings.Contains(stored, "test-token-123") {
		t.Errorf("localStorage authorized = %q (%v), want the token", stored, err)
	}
	if ext := s.ExternalRequests(); len(ext) > 0 {
		t.Errorf("the page made requests off loopback:\n%s", lines(ext))
	}
	checkClean(t, s)
}

// checkClean fails the test on CSP violations, console errors and uncaught
// exceptions.
func checkClean(t *testing.T, s *Session) {
	t.Helper()
	if v, err := s.CSPViolations(); err != nil {
		t.Errorf("reading CSP violations: %v", err)
	} else if len(v) > 0 {
		t.Errorf("Content-Security-Policy violations:\n\t%s", strings.Join(v, "\n\t"))
	}
	if p := s.Problems(); len(p) > 0 {
		t.Errorf("console errors or exceptions:\n\t%s", strings.Join(p, "\n\t"))
	}
}

func requested(reqs []Request, u string) bool {
	for _, r := range reqs {
		if r.URL == u || strings.HasPrefix(r.URL, u+"?") {
			return true
		}
	}
	return false
}

func lines(reqs []Request) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString("\t" + r.String() + "\n")
	}
	return b.String()
}
