package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"
)

// Planned moves in placed scenarios (docs/placement.md, "Which broker
// serves which family"): move pins a family to a broker at run time, and
// restart_broker with broker and graceful stops a broker with SIGTERM (its
// families handed over) and starts it again on its own address.

// restartStep runs restart_broker: b1 (or the named broker of a placed
// scenario) stops, with SIGKILL or, graceful, with SIGTERM, and a new
// process starts on the same address and data dir: a new epoch.
func (h *harness) restartStep(st step) error {
	b := h.broker
	if st.Broker != "" {
		var err error
		if b, err = h.brokerByName(st.Broker); err != nil {
			return err
		}
	}
	if st.Graceful {
		if err := b.terminate(30 * time.Second); err != nil {
			return err
		}
	}
	return b.restart()
}

// terminate stops the broker with SIGTERM (it drains its streams and hands
// its families over) and waits for it to exit; SIGKILL after wait.
func (b *broker) terminate(wait time.Duration) error {
	b.mu.Lock()
	cmd := b.cmd
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee interface{ ExitCode() int }
		if err != nil && errors.As(err, &ee) && ee.ExitCode() != 0 {
			return fmt.Errorf("broker %s exited with %v after SIGTERM: %s", b.name, err, b.logTail())
		}
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("broker %s did not exit within %v of SIGTERM: %s", b.name, wait, b.logTail())
	}
}

// moveStep runs move: POST /v1/placement/move {"to": broker} as token,
// through the first broker of the deployment that takes it (one that does
// not list broker as live yet answers invalid_request: tried again), then
// waits until that broker's GET /v1/placement names broker as the owner
// and broker answers for the family (its handover loaded).
func (h *harness) moveStep(ctx context.Context, st step) error {
	if h.deployment == nil {
		return fmt.Errorf("%s needs a scenario with placement", st.Op)
	}
	target, err := h.brokerByName(st.Broker)
	if err != nil {
		return err
	}
	tok, ok := tokens[st.Token]
	if !ok {
		return fmt.Errorf("no token %q", st.Token)
	}
	bases := []string{h.brokerURL}
	for _, b := range h.deployment.others {
		bases = append(bases, b.url())
	}
	var via, last string
	if !waitFor(ctx, st.timeout(), func() bool {
		for _, base := range bases {
			status, body, err := placementCall(ctx, http.MethodPost, base+"/v1/placement/move", tok.Secret, `{"to":"`+target.name+`"}`)
			if err != nil {
				last = err.Error()
				continue
			}
			if status == http.StatusAccepted {
				via = base
				return true
			}
			last = fmt.Sprintf("%s answered %d %s", base, status, body)
		}
		return false
	}) {
		return fmt.Errorf("no broker took the move to %s within %v: %s", st.Broker, st.timeout(), last)
	}
	var owner, served string
	if !waitFor(ctx, st.timeout(), func() bool {
		owner = placementOwner(ctx, via, tok.Secret)
		served = servedBy(ctx, via, st.Token)
		return owner == target.name && served == target.url()
	}) {
		return fmt.Errorf("moved to %s through %s: GET /v1/placement names %q as the owner, the family is served by %q, within %v",
			st.Broker, via, owner, served, st.timeout())
	}
	return nil
}

// placementOwner is the owner's name in base's GET /v1/placement, "" when
// none (or no answer).
func placementOwner(ctx context.Context, base, secret string) string {
	status, body, err := placementCall(ctx, http.MethodGet, base+"/v1/placement", secret, "")
	if err != nil || status != http.StatusOK {
		return ""
	}
	var p struct {
		Owner *struct {
			Broker string `json:"broker"`
		} `json:"owner"`
	}
	if json.Unmarshal(body, &p) != nil || p.Owner == nil {
		return ""
	}
	return p.Owner.Broker
}

// placementCall sends one request with a bearer secret and a JSON body
// ("" for none): the status and the body.
func placementCall(ctx context.Context, method, url, secret, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}
