// Package browser drives a real headless Chromium from Go tests, through the
// Chrome DevTools Protocol (github.com/chromedp/chromedp, no npm, no driver
// binary). It records every network request a page makes, the page's
// Content-Security-Policy violations, console errors and uncaught
// exceptions, so a test can assert that a page works offline and cleanly.
//
// Chromium comes from Debian: tests/browser/install.sh installs it when it
// is missing. A test that needs the browser fails when Chromium cannot be
// found, unless MUSTER_TEST_BROWSER=off, in which case it is skipped.
// MUSTER_CHROMIUM names another Chromium binary.
package browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Environment variables read by Start.
const (
	// EnvSwitch set to "off" skips browser tests; anything else runs them.
	EnvSwitch = "MUSTER_TEST_BROWSER"
	// EnvChromium names the Chromium (or Chrome) binary to use.
	EnvChromium = "MUSTER_CHROMIUM"
)

// candidates are the places Debian's chromium package (and its older
// name) put the browser.
var candidates = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"}

// FindChromium returns the path of the Chromium binary: $MUSTER_CHROMIUM,
// else Debian's /usr/bin/chromium, else chromium or chromium-browser on PATH.
func FindChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%s=%q is not an executable file", EnvChromium, p)
	}
	for _, p := range candidates {
		if isExecutable(p) {
			return p, nil
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium not found (looked at " + strings.Join(candidates, ", ") + " and PATH)")
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Flags are the Chromium switches the harness adds to chromedp's defaults
// (which already include --headless, --no-first-run,
// --disable-background-networking and --disable-sync). The background
// switches stop Chromium from contacting Google's hosts on its own (without
// them it tries external hosts, which this network refuses). The resolver
// rule makes every host but localhost, 127.0.0.1 and [::1] unresolvable (it
// applies to IP literals too), so a page that tries to reach the internet
// fails at once instead of waiting, and the recorder still sees the attempt.
var Flags = map[string]any{
	"headless":                      true,
	"no-sandbox":                    true, // tests run as root in containers
	"disable-gpu":                   true,
	"disable-quic":                  true,
	"no-first-run":                  true,
	"disable-background-networking": true,
	"disable-component-update":      true,
	"disable-sync":                  true,
	"disable-domain-reliability":    true,
	"no-pings":                      true,
	"host-resolver-rules":           "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1, EXCLUDE [::1]",
}

// Options configures Start.
type Options struct {
	// Width and Height of the window; 1280x1024 when zero.
	Width, Height int
	// Timeout bounds the whole browser session; 90s when zero.
	Timeout time.Duration
}

// Session is a running headless Chromium with one tab.
type Session struct {
	// Ctx is the chromedp context of the tab: pass it to chromedp.Do/Run.
	Ctx context.Context

	rec *recorder
}

// Start launches Chromium with a fresh profile for the test and returns its
// session; the browser is closed when the test ends. Start fails the test
// when Chromium cannot be found or started, and skips it when
// MUSTER_TEST_BROWSER=off.
func Start(t testing.TB, opts Options) *Session {
	t.Helper()
	if strings.EqualFold(os.Getenv(EnvSwitch), "off") {
		t.Skipf("%s=off: real-browser test skipped", EnvSwitch)
	}
	path, err := FindChromium()
	if err != nil {
		t.Fatalf("%v\n\tinstall it with tests/browser/install.sh, point %s at a binary, or set %s=off to skip browser tests",
			err, EnvChromium, EnvSwitch)
	}
	if opts.Width == 0 {
		opts.Width, opts.Height = 1280, 1024
	}
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}

	profile, err := os.MkdirTemp("", "muster-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })

	var output lockedBuffer
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(opts.Width, opts.Height),
		chromedp.CombinedOutput(&output),
	)
	for name, value := range Flags {
		allocOpts = append(allocOpts, chromedp.Flag(name, value))
	}

	base, cancelTimeout := context.WithTimeout(context.Background(), opts.Timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(base, allocOpts...)
	rec := &recorder{}
	// chromedp may report errors from its own goroutines while the browser
	// shuts down; stop forwarding them to t once the test is cleaned up.
	var logMu sync.Mutex
	testDone := false
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if !testDone {
			t.Logf("chromedp: "+format, args...)
		}
	}
	ctx, cancelCtx := chromedp.NewContext(allocCtx,
		chromedp.WithListener(rec.listen),
		chromedp.WithErrorf(logf),
	)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelTimeout()
		logMu.Lock()
		testDone = true
		logMu.Unlock()
	})

	// The first action starts the browser and attaches the tab.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v\nbrowser output:\n%s", path, err, output.String())
	}
	// Record CSP violations: DevTools-injected scripts run despite the CSP.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: cspListener,
	}); err != nil {
		t.Fatalf("installing the CSP listener: %v", err)
	}
	return &Session{Ctx: ctx, rec: rec}
}

// cspListener keeps the page's CSP violations where CSPViolations reads them.
const cspListener = `(() => {
  window.__musterCSP = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__musterCSP.push(e.effectiveDirective + " blocked " + (e.blockedURI || "(inline)") +
      (e.sourceFile ? " at " + e.sourceFile + ":" + e.lineNumber : ""));
  });
})();`

// Request is one network request the page made (or tried to make).
type Request struct {
	URL    string
	Method string
	Type   string // Document, Script, Stylesheet, Fetch, Image...
	Status int64  // 0 until a response arrived, or when it failed
	Failed string // the error text of a failed request
}

func (r Request) String() string {
	s := fmt.Sprintf("%s %s [%s]", r.Method, r.URL, r.Type)
	if r.Status != 0 {
		s += fmt.Sprintf(" -> %d", r.Status)
	}
	if r.Failed != "" {
		s += " failed: " + r.Failed
	}
	return s
}

// Requests returns every request the tab made so far, in order. It includes
// requests that were blocked or failed.
func (s *Session) Requests() []Request { return s.rec.requests() }

// ExternalRequests returns the requests whose URL is neither on a loopback
// address (127.0.0.0/8, ::1, localhost) nor local to the browser (data:,
// blob:, about:, chrome:, devtools:).
func (s *Session) ExternalRequests() []Request {
	var out []Request
	for _, r := range s.rec.requests() {
		if !IsLocalURL(r.URL) {
			out = append(out, r)
		}
	}
	return out
}

// Problems returns the console errors and uncaught exceptions the tab
// reported so far.
func (s *Session) Problems() []string { return s.rec.problemList() }

// CSPViolations returns the Content-Security-Policy violations of the current
// document.
func (s *Session) CSPViolations() ([]string, error) {
	return chromedp.Run(s.Ctx, chromedp.Evaluate[[]string](`window.__musterCSP || []`))
}

// Step runs actions with a time limit (30s when zero). On failure it saves
// a screenshot and fails the test with the requests and problems so far.
func (s *Session) Step(t testing.TB, what string, limit time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if limit == 0 {
		limit = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.Ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		s.Fail(t, fmt.Sprintf("%s: %v", what, err))
	}
}

// Fail saves a screenshot (failed.png) and fails the test with msg, the
// requests and the problems seen so far.
func (s *Session) Fail(t testing.TB, msg string) {
	t.Helper()
	var shot string
	ctx, cancel := context.WithTimeout(s.Ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		shot = filepath.Join(t.ArtifactDir(), "failed.png")
		if os.WriteFile(shot, png, 0o644) != nil {
			shot = ""
		}
	}
	var reqs strings.Builder
	for _, r := range s.Requests() {
		reqs.WriteString("\t" + r.String() + "\n")
	}
	t.Fatalf("%s\nscreenshot: %s (kept with go test -artifacts)\nrequests:\n%sproblems:\n\t%s",
		msg, shot, reqs.String(), strings.Join(s.Problems(), "\n\t"))
}

// Screenshot saves a PNG of the whole page as name in the test's artifact
// directory (kept with go test -artifacts -outputdir DIR) and returns its
// path.
func (s *Session) Screenshot(t testing.TB, name string) string {
	t.Helper()
	png, err := chromedp.Run(s.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
	return p
}

// IsLocalURL reports whether fetching u stays on this machine: a loopback
// host, or a scheme that needs no network at all.
func IsLocalURL(u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(pu.Scheme) {
	case "data", "blob", "about", "chrome", "chrome-extension", "devtools":
		return true
	case "http", "https", "ws", "wss":
	default:
		return false
	}
	host := pu.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// recorder collects what the tab reports; listen runs in chromedp's event
// loop and must return at once.
type recorder struct {
	mu       sync.Mutex
	reqs     []*Request                     // in the order they started
	live     map[network.RequestID]*Request // the latest hop of each request id
	problems []string
}

func (r *recorder) add(id network.RequestID, req *Request) {
	if r.live == nil {
		r.live = map[network.RequestID]*Request{}
	}
	r.reqs = append(r.reqs, req)
	r.live[id] = req
}

func (r *recorder) listen(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		// A redirect reuses the request id: close the previous hop.
		if prev := r.live[ev.RequestID]; prev != nil && ev.RedirectResponse != nil {
			prev.Status = ev.RedirectResponse.Status
		}
		req := &Request{Type: string(ev.Type)}
		if ev.Request != nil {
			req.URL, req.Method = ev.Request.URL, ev.Request.Method
		}
		r.add(ev.RequestID, req)
	case *network.EventResponseReceived:
		if req := r.live[ev.RequestID]; req != nil && ev.Response != nil {
			req.Status = ev.Response.Status
		}
	case *network.EventLoadingFailed:
		if req := r.live[ev.RequestID]; req != nil {
			req.Failed = ev.ErrorText
			if ev.BlockedReason != "" {
				req.Failed += " (blocked: " + string(ev.BlockedReason) + ")"
			}
		}
	case *network.EventWebSocketCreated:
		r.add("ws:"+ev.RequestID, &Request{URL: ev.URL, Method: "GET", Type: "WebSocket"})
	case *runtime.EventExceptionThrown:
		if d := ev.ExceptionDetails; d != nil {
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			r.problems = append(r.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var parts []string
			for _, a := range ev.Args {
				if a.Description != "" {
					parts = append(parts, a.Description)
				} else {
					parts = append(parts, strings.Trim(string(a.Value), `"`))
				}
			}
			r.problems = append(r.problems, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
		}
	case *cdplog.EventEntryAdded:
		if e := ev.Entry; e != nil && e.Level == cdplog.EntryLevelError {
			r.problems = append(r.problems, fmt.Sprintf("log %s: %s %s", e.Source, e.Text, e.URL))
		}
	}
}

func (r *recorder) requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Request, len(r.reqs))
	for i, req := range r.reqs {
		out[i] = *req
	}
	return out
}

func (r *recorder) problemList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// lockedBuffer collects the browser's output for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) < 64<<10 {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
