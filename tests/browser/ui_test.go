package browser

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotsDir, when set, receives the dashboard's screenshots as well
// as the test's artifact directory. The README's and docs/ui.md's images
// are made with:
//
//	go test ./tests/browser -run 'TestUI' -count=1 -ui.screenshots=../../docs/ui
var screenshotsDir = flag.String("ui.screenshots", "", "also write the /ui/ screenshots into `DIR` (e.g. ../../docs/ui)")

// shot saves a screenshot of the viewport (the page as a person sees it).
func shot(t *testing.T, s *Session, name string) {
	t.Helper()
	png, err := chromedp.Run(s.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.ArtifactDir()}
	if *screenshotsDir != "" {
		dirs = append(dirs, *screenshotsDir)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s (%d bytes)", name, len(png))
}

// poll waits (up to limit) until the page function returns a non-empty
// string, and returns it; it fails the test with what on timeout.
func poll(t *testing.T, s *Session, what string, limit time.Duration, fn string, args ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.Ctx, limit)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.PollFunction[string](fn, chromedp.WithPollingArgs(args...), chromedp.WithPollingInterval(20*time.Millisecond)))
	if err != nil {
		state, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`(document.getElementById("state")?.textContent ?? "(no page)") + " / missing: " + (document.getElementById("missing")?.textContent ?? "") + " / " + (document.getElementById("fleet-at")?.textContent ?? "")`))
		s.Fail(t, fmt.Sprintf("%s: not within %s (%v); state: %q", what, limit, err, state))
	}
	return v
}

// rowsJS returns the routes of the table's rows, joined by spaces, once
// they are exactly the wanted set (given as one space-separated string).
const rowsJS = `(want) => {
  const got = [...document.querySelectorAll("#rows tr")].map((tr) => tr.dataset.route).join(" ");
  return got === want ? "rows: " + (got || "(none)") : "";
}`

// stateJS returns the state text once #state's data-state is want and the
// text contains part.
const stateJS = `(want, part) => {
  const e = document.getElementById("state");
  return e && e.dataset.state === want && e.textContent.includes(part) ? e.textContent : "";
}`

// openUI opens /ui/ and starts watching selector with the test token.
func openUI(t *testing.T, s *Session, b *uiBroker, selector string) {
	t.Helper()
	s.Step(t, "opening /ui", 0,
		chromedp.Navigate(b.URL()+"/ui"),
		chromedp.WaitVisible(chromedp.ID("selector")),
	)
	clearSelector(t, s)
	s.Step(t, "watching "+selector, 0,
		chromedp.SendKeys(chromedp.ID("selector"), selector),
		chromedp.SendKeys(chromedp.ID("token"), uiToken),
		chromedp.Click(chromedp.ID("watch")),
	)
}

// clearSelector empties the selector box (its property, whatever was typed).
func clearSelector(t *testing.T, s *Session) {
	t.Helper()
	if _, err := chromedp.Run(s.Ctx, chromedp.Evaluate[bool](`(document.getElementById("selector").value = "") === ""`)); err != nil {
		s.Fail(t, "clearing the selector: "+err.Error())
	}
}

// allowedProblems drops what a test provokes on purpose: a refused
// connection while the broker restarts, the 403 of a forbidden selector,
// a CORS refusal of an origin that is not allowed.
func allowedProblems(problems []string, allowed ...string) []string {
	return slices.DeleteFunc(slices.Clone(problems), func(p string) bool {
		for _, a := range allowed {
			if strings.Contains(p, a) {
				return true
			}
		}
		return false
	})
}

func checkUIClean(t *testing.T, s *Session, allowed ...string) {
	t.Helper()
	if v, err := s.CSPViolations(); err != nil {
		t.Errorf("reading CSP violations: %v", err)
	} else if len(v) > 0 {
		t.Errorf("Content-Security-Policy violations:\n\t%s", strings.Join(v, "\n\t"))
	}
	if p := allowedProblems(s.Problems(), allowed...); len(p) > 0 {
		t.Errorf("console errors or exceptions:\n\t%s", strings.Join(p, "\n\t"))
	}
	if ext := s.ExternalRequests(); len(ext) > 0 {
		t.Errorf("the page made requests off loopback:\n%s", lines(ext))
	}
}

// TestUILiveLeases drives /ui/ against the real broker binary: a lease
// acquired with curl shows up within a second, leaves on release, the
// fleet's gap follows the leases, and a broker restart shows recovering,
// then ready with the new epoch and the leases of the new broker only.
func TestUILiveLeases(t *testing.T) {
	s := Start(t, Options{Width: 1280, Height: 900, Timeout: 150 * time.Second})
	b := startUIBroker(t)
	const sel = "lease://acme/**"
	openUI(t, s, b, sel)
	poll(t, s, "ready", 10*time.Second, stateJS, "ready", b.Epoch)
	// Where the family is served (GET /v1/placement): one broker here.
	poll(t, s, "the placement", 5*time.Second, `(want) => { const got = document.getElementById("placement").textContent; return got === want ? got : ""; }`, "single broker")

	// Every control has an accessible name.
	unnamed, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input, button, select, textarea")]
	  .filter((e) => !(e.labels?.length || e.getAttribute("aria-label") || e.textContent.trim()))
	  .map((e) => e.outerHTML)`))
	if len(unnamed) > 0 {
		t.Errorf("controls without an accessible name: %q", unnamed)
	}

	// The token is kept in sessionStorage, never in the URL.
	where, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`location.href + " | " + (sessionStorage.getItem("muster.ui.token") ?? "")`))
	if strings.Contains(strings.Split(where, " | ")[0], uiToken) || !strings.HasSuffix(where, " | "+uiToken) {
		t.Errorf("location and sessionStorage token: %q: want the token in sessionStorage only", where)
	}

	// Acquire with curl: the row appears within 1 s.
	doc1 := "lease://acme/renderers/doc-1"
	h1 := b.acquire("worker-1", doc1, 30*time.Second)
	t0 := time.Now()
	poll(t, s, "the acquired lease's row", time.Second, rowsJS, doc1)
	t.Logf("row appeared %v after curl's acquire returned", time.Since(t0).Round(time.Millisecond))
	owner, _ := chromedp.Run(s.Ctx, chromedp.Text(chromedp.CSS(`#rows tr td.owner`)))
	if owner != "worker-1" {
		t.Errorf("owner cell %q, want worker-1", owner)
	}
	poll(t, s, "the event log's entry with its revision", time.Second, `() => {
	  const li = [...document.querySelectorAll("#events li.acquired")].find((l) => l.textContent.includes("doc-1"));
	  return li && /r\d+ /.test(li.textContent) ? li.textContent : "";
	}`)

	// The fleet view: doc-1 and doc-2 are desired, doc-1 is held.
	b.curl("POST", "/v1/fleets/acme%2Frenderers/specs", `{"kind":"doc","spec":{"n":1}}`, 201)
	b.curl("POST", "/v1/fleets/acme%2Frenderers/specs", `{"kind":"doc","spec":{"n":2}}`, 201)
	s.Step(t, "showing the fleet acme/renderers", 0,
		chromedp.SendKeys(chromedp.ID("fleet-root"), "acme/renderers"),
		chromedp.SendKeys(chromedp.ID("fleet-live"), "lease://acme/renderers/*"),
		chromedp.Click(chromedp.ID("fleet-show")),
	)
	listJS := `(id, want) => { const got = [...document.querySelectorAll("#" + id + " li")].map((l) => l.textContent).join(" ") || "(none)"; return got === want ? id + ": " + got : ""; }`
	poll(t, s, "desired doc-1 doc-2", 5*time.Second, listJS, "desired", "doc-1 doc-2")
	poll(t, s, "missing doc-2", 5*time.Second, listJS, "missing", "doc-2")
	// Acquiring doc-2 closes the gap: the fleet view refreshes as leases change.
	h2 := b.acquire("worker-2", "lease://acme/renderers/doc-2", 30*time.Second)
	poll(t, s, "both rows", time.Second, rowsJS, doc1+" lease://acme/renderers/doc-2")
	poll(t, s, "missing nothing", 5*time.Second, listJS, "missing", "(none)")
	b.acquire("worker-3", "lease://acme/indexers/idx-7", 30*time.Second)
	poll(t, s, "three rows", time.Second, rowsJS, "lease://acme/indexers/idx-7 "+doc1+" lease://acme/renderers/doc-2")
	held, _ := chromedp.Run(s.Ctx, chromedp.Text(chromedp.ID("held")))
	if held != "3" {
		t.Errorf("held counter %q, want 3", held)
	}
	shot(t, s, "ui-ready.png")

	// Release: the row leaves.
	b.release(h1)
	t0 = time.Now()
	poll(t, s, "the released lease's row leaving", time.Second, rowsJS, "lease://acme/indexers/idx-7 lease://acme/renderers/doc-2")
	t.Logf("row left %v after curl's release returned", time.Since(t0).Round(time.Millisecond))
	poll(t, s, "missing doc-1", 5*time.Second, listJS, "missing", "doc-1")
	_ = h2

	// On a phone.
	s.Step(t, "a phone-sized viewport", 0, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	wide, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if wide {
		t.Errorf("on a 390px-wide screen the page scrolls sideways")
	}
	shot(t, s, "ui-phone.png")
	s.Step(t, "back to the laptop viewport", 0, chromedp.EmulateViewport(1280, 900))

	// Restart: recovering (the stream ended with shutdown), then ready
	// with the new epoch and only the new broker's leases.
	old := b.Epoch
	b.Stop()
	poll(t, s, "recovering after the broker stopped", 10*time.Second, stateJS, "recovering", "restart")
	shot(t, s, "ui-recovering.png")
	b.Start()
	if b.Epoch == old {
		t.Fatalf("the restarted broker has the old epoch %s", old)
	}
	b.acquire("worker-9", "lease://acme/renderers/doc-9", 30*time.Second)
	poll(t, s, "ready with the new epoch", 15*time.Second, stateJS, "ready", b.Epoch)
	poll(t, s, "the new broker's rows only", 5*time.Second, rowsJS, "lease://acme/renderers/doc-9")
	epoch, _ := chromedp.Run(s.Ctx, chromedp.Text(chromedp.ID("epoch")))
	if epoch != b.Epoch {
		t.Errorf("epoch counter %q, want the new epoch %q", epoch, b.Epoch)
	}
	poll(t, s, "the restart in the event log", time.Second, `(e) => [...document.querySelectorAll("#events li")].map((l) => l.textContent).find((x) => x.includes("new epoch " + e)) ?? ""`, b.Epoch)
	checkUIClean(t, s, "net::ERR_CONNECTION_REFUSED", "net::ERR_EMPTY_RESPONSE", "net::ERR_CONNECTION_RESET")
}

// TestUIForbiddenSelector: a selector the token has no grant for shows the
// broker's forbidden error, not an empty table.
func TestUIForbiddenSelector(t *testing.T) {
	s := Start(t, Options{Width: 1280, Height: 900})
	b := startUIBroker(t)
	b.acquire("worker-1", "lease://acme/renderers/doc-1", 30*time.Second)
	openUI(t, s, b, "lease://other/**")
	poll(t, s, "stopped", 10*time.Second, stateJS, "stopped", "forbidden")
	msg := poll(t, s, "the error", time.Second, `() => { const e = document.getElementById("error"); return e && !e.hidden ? e.textContent : ""; }`)
	if !strings.Contains(msg, "forbidden") || !strings.Contains(msg, "lease://other/**") {
		t.Errorf("error shown: %q, want the code forbidden and the selector", msg)
	}
	hidden, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`[document.getElementById("leases").parentElement.hidden, document.getElementById("empty").hidden].join()`))
	if hidden != "true,true" {
		t.Errorf("table container and empty note hidden: %s, want true,true (no empty table)", hidden)
	}
	shot(t, s, "ui-forbidden.png")

	// Another selector in the same tab: the error goes, the table comes back.
	clearSelector(t, s)
	s.Step(t, "watching lease://acme/** instead", 0,
		chromedp.SendKeys(chromedp.ID("selector"), "lease://acme/**"),
		chromedp.Click(chromedp.ID("watch")),
	)
	poll(t, s, "ready", 10*time.Second, stateJS, "ready", b.Epoch)
	poll(t, s, "the held lease", time.Second, rowsJS, "lease://acme/renderers/doc-1")
	shown, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`[document.getElementById("error").hidden, document.getElementById("leases").parentElement.hidden].join()`))
	if shown != "true,false" {
		t.Errorf("error hidden, table hidden: %s, want true,false", shown)
	}
	checkUIClean(t, s, "status of 403")
}
