package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// errCut is what an abandoned actor's requests fail with.
var errCut = errors.New("harness: the actor abandoned this session")

// cutTransport fails every request once cut: an abandoned session's
// keepalives never reach the broker, which ends the session at its TTL.
type cutTransport struct {
	base http.RoundTripper
	cut  atomic.Bool
}

func (t *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.cut.Load() {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errCut
	}
	return t.base.RoundTrip(r)
}

// actor is a worker of a scenario: a Go SDK session straight at the broker,
// and the lease handles it acquired.
type actor struct {
	name, token, owner string
	ttl                time.Duration
	brokerURL          string

	mu      sync.Mutex
	cut     *cutTransport // of the current session's client
	client  *muster.Client
	session *muster.Session
	leases  map[string]*muster.Lease
	old     []*muster.Session // earlier sessions, closed at the reset
	cuts    []*cutTransport
}

// newSession gives the actor a new session on a new client; the previous
// session is left as it is (ended, lost or abandoned).
func (a *actor) newSession(ctx context.Context, base *http.Transport) error {
	cut := &cutTransport{base: base}
	c, err := muster.New(a.brokerURL, muster.WithToken(tokens[a.token].Secret),
		muster.WithHTTPClient(&http.Client{Transport: cut}))
	if err != nil {
		return err
	}
	s, err := c.NewSession(ctx, a.owner, a.ttl)
	if err != nil {
		return fmt.Errorf("session of %s: %w", a.name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.session != nil {
		a.old = append(a.old, a.session)
	}
	a.cut, a.client, a.session, a.leases = cut, c, s, map[string]*muster.Lease{}
	a.cuts = append(a.cuts, cut)
	return nil
}

// current is the actor's client and session.
func (a *actor) current() (*muster.Client, *muster.Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client, a.session
}

func (a *actor) lease(route string) *muster.Lease {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.leases[route]
}

func (a *actor) keep(route string, l *muster.Lease) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.leases[route] = l
}

// abandon stops the current session's traffic for good.
func (a *actor) abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cut.cut.Store(true)
}

// stop cuts every session of the actor and stops their keepalives locally,
// without a request: the broker behind them is about to be replaced.
func (a *actor) stop() {
	a.mu.Lock()
	sessions := append(a.old, a.session)
	for _, c := range a.cuts {
		c.cut.Store(true)
	}
	a.mu.Unlock()
	for _, s := range sessions {
		if s != nil {
			_ = s.Close(context.Background())
		}
	}
}

// expectErr compares an outcome with a step's expect_error: without one the
// outcome must be a success, with one an error of that contract code.
func expectErr(err error, code string) error {
	if code == "" {
		return err
	}
	var e *muster.Error
	if !errors.As(err, &e) || string(e.Code) != code {
		if err == nil {
			return fmt.Errorf("succeeded, want error %s", code)
		}
		return fmt.Errorf("got %v, want error %s", err, code)
	}
	return nil
}

// answer turns a raw API response into nil (status want) or the broker's
// problem as a *muster.Error.
func answer(resp *http.Response, err error, want int) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == want {
		return nil
	}
	var p struct {
		Code   string `json:"code"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) != nil || p.Code == "" {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
	}
	return &muster.Error{Code: muster.Code(p.Code), Status: resp.StatusCode, Title: p.Title, Detail: p.Detail}
}
