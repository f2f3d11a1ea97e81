package browser

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/musterhq/muster/cmd/muster/app"
)

// TestTryItOutAgainstTheBroker opens the real broker's /docs (the broker as
// `make run` starts it: dev mode, embedded Swagger UI, its own spec) and
// creates a session with "Try it out" from the operation's example body.
func TestTryItOutAgainstTheBroker(t *testing.T) {
	m := app.NewMain()
	m.Addr, m.DataDir = "127.0.0.1:0", t.TempDir()
	m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	s := Start(t, Options{Width: 1280, Height: 1024})
	summary := chromedp.CSS(`.opblock-post .opblock-summary-path[data-path="/v1/sessions"]`)
	s.Step(t, "opening the broker's /docs", 0,
		chromedp.Navigate(m.URL()+"/docs"),
		chromedp.WaitVisible(summary),
	)
	s.Step(t, "expanding POST /v1/sessions and trying it out", 0,
		chromedp.Click(summary),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open .try-out__btn")),
		chromedp.Click(chromedp.CSS(".opblock.is-open .try-out__btn")),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open .btn.execute")),
		chromedp.Click(chromedp.CSS(".opblock.is-open .btn.execute")),
		chromedp.WaitVisible(chromedp.CSS(".opblock.is-open .live-responses-table")),
	)
	pctx, cancel := context.WithTimeout(s.Ctx, 15*time.Second)
	defer cancel()
	shown, err := chromedp.Run(pctx, chromedp.PollFunction[string](`() => {
		const t = document.querySelector(".opblock.is-open .live-responses-table");
		return t && t.textContent.includes("holder_incarnation") ? t.textContent : "";
	}`, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		s.Fail(t, fmt.Sprintf("waiting for the created session in the page: %v", err))
	}
	status, _ := chromedp.Run(s.Ctx, chromedp.Text(chromedp.CSS(".opblock.is-open .live-responses-table tbody tr.response .response-col_status")))
	if strings.TrimSpace(status) != "201" || !strings.Contains(shown, "worker-1") {
		t.Errorf("status %q, body %q: want 201 with the example's owner_id", status, shown)
	}
	if ext := s.ExternalRequests(); len(ext) > 0 {
		t.Errorf("the page made requests off loopback:\n%s", lines(ext))
	}
	s.Screenshot(t, "broker-docs.png")
	checkClean(t, s)
}
