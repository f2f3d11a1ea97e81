package muster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// conformanceHarness is the shared harness of clients/conformance, started
// by its run-harness.sh once per test binary (on first use) and stopped by
// TestMain. It runs the broker, the gating proxy and the actors; this
// package's runner implements only the observer ops.
type conformanceHarness struct {
	Control string `json:"control"`
	Broker  string `json:"broker"`
	Proxy   string `json:"proxy"`

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	tr     *http.Transport
	hc     *http.Client
	tokens map[string]string // token name → bearer secret
}

var (
	harnessOnce sync.Once
	theHarness  *conformanceHarness
	harnessErr  error
)

// sharedHarness starts the harness on first use.
func sharedHarness(tb testing.TB) *conformanceHarness {
	tb.Helper()
	harnessOnce.Do(func() { theHarness, harnessErr = startHarness() })
	if harnessErr != nil {
		tb.Fatalf("starting the conformance harness: %v", harnessErr)
	}
	return theHarness
}

// stopHarness closes the harness's stdin (it then stops everything) and
// waits for it.
func stopHarness() {
	if theHarness == nil {
		return
	}
	stopHarnessProc(theHarness)
}

// harnessPool is n harnesses to share: the shared one and n-1 more, stopped
// when tb ends.
func harnessPool(tb testing.TB, n int) chan *conformanceHarness {
	tb.Helper()
	pool := make(chan *conformanceHarness, n)
	pool <- sharedHarness(tb)
	for range n - 1 {
		h, err := startHarness()
		if err != nil {
			tb.Fatalf("starting a conformance harness: %v", err)
		}
		tb.Cleanup(func() { stopHarnessProc(h) })
		pool <- h
	}
	return pool
}

func startHarness() (*conformanceHarness, error) {
	cmd := exec.Command("../conformance/run-harness.sh")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("reading the harness's first line: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	h := &conformanceHarness{cmd: cmd, stdin: stdin, tr: tr, hc: &http.Client{Transport: tr}}
	if err := json.Unmarshal(line, h); err != nil || h.Control == "" || h.Proxy == "" {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the harness's first line %q: %v", line, err)
	}
	if err := h.get(context.Background(), "/tokens", &h.tokens); err != nil {
		stopHarnessProc(h)
		return nil, err
	}
	return h, nil
}

func stopHarnessProc(h *conformanceHarness) {
	_ = h.stdin.Close()
	_ = h.cmd.Wait()
	h.tr.CloseIdleConnections()
}

// harnessError is a non-2xx answer of the control API (its problem body).
type harnessError struct {
	Status int
	Code   string `json:"code"`
	Op     string `json:"op"`
	Detail string `json:"detail"`
}

func (e *harnessError) Error() string {
	return fmt.Sprintf("harness %d %s (op %s): %s", e.Status, e.Code, e.Op, e.Detail)
}

// do sends one control request; a 2xx answer is decoded into out (if any).
func (h *conformanceHarness) do(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, h.Control+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &harnessError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil {
			e.Detail = string(data)
		}
		return e
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (h *conformanceHarness) get(ctx context.Context, path string, out any) error {
	return h.do(ctx, http.MethodGet, path, nil, out)
}

func (h *conformanceHarness) post(ctx context.Context, path string, body []byte) error {
	return h.do(ctx, http.MethodPost, path, body, nil)
}

// holder is the current holder incarnation of a scenario actor.
func (h *conformanceHarness) holder(ctx context.Context, actor string) (string, error) {
	var out struct {
		HolderIncarnation string `json:"holder_incarnation"`
	}
	err := h.get(ctx, "/holder/"+url.PathEscape(actor), &out)
	return out.HolderIncarnation, err
}

// list is a fresh LIST of selector as token, every page drained, as
// route@holder_incarnation, and the epoch of the broker that answered.
func (h *conformanceHarness) list(ctx context.Context, selector, token string) ([]string, string, error) {
	var out struct {
		Epoch string `json:"epoch"`
		Items []struct {
			Route             string `json:"route"`
			HolderIncarnation string `json:"holder_incarnation"`
		} `json:"items"`
	}
	q := url.Values{"selector": {selector}, "token": {token}}
	if err := h.get(ctx, "/list?"+q.Encode(), &out); err != nil {
		return nil, "", err
	}
	keys := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		keys = append(keys, it.Route+"@"+it.HolderIncarnation)
	}
	return keys, out.Epoch, nil
}

// waitFor polls cond every 10 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
