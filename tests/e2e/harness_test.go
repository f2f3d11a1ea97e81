package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/tests/manualclock"
	"github.com/musterhq/muster/tests/musterbin"
)

// The contract every response is validated against: the file, not the
// embedded copy, so a drift between them fails here too.
var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func contractRouter(tb testing.TB) routers.Router {
	tb.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		var spec *openapi3.T
		spec, specErr = loader.LoadFromFile("../../openapi.yaml")
		if specErr != nil {
			return
		}
		if specErr = spec.Validate(context.Background()); specErr != nil {
			return
		}
		spec.Servers = nil
		specRouter, specErr = gorillamux.NewRouter(spec)
	})
	if specErr != nil {
		tb.Fatalf("openapi.yaml: %v", specErr)
	}
	return specRouter
}

// syncBuffer collects the broker's log lines.
type syncBuffer = musterbin.LockedBuffer

// Broker is a real broker (the same Main as the binary) on a free loopback
// port with a temp data dir and a manual clock.
type Broker struct {
	*app.Main
	Clock  *manualclock.Clock
	Logs   *syncBuffer
	tokens []TokenSpec
	events *eventLog
	closed bool
}

// eventLog records every committed change of the held set, in revision
// order, as the core produced it: the ground truth tests compare with.
type eventLog struct {
	mu  sync.Mutex
	all []core.Event
}

func (l *eventLog) add(ev []core.Event) {
	l.mu.Lock()
	l.all = append(l.all, ev...)
	l.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (b *Broker) Events() []core.Event {
	b.events.mu.Lock()
	defer b.events.mu.Unlock()
	return append([]core.Event(nil), b.events.all...)
}

// TokenSpec configures one token for MustStartBroker.
type TokenSpec = musterbin.Token

// MustStartBroker starts a broker on a manual clock and stops it when the
// test ends. With no tokens it runs in dev mode.
func MustStartBroker(tb testing.TB, tokens ...TokenSpec) *Broker {
	tb.Helper()
	return startBroker(tb, brokerOptions{manual: true, tokens: tokens})
}

// MustRestartBroker starts a new broker lifetime (a new epoch) on the data
// directory of b, after stopping b.
func MustRestartBroker(tb testing.TB, b *Broker) *Broker {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	b.closed = true
	return startBroker(tb, brokerOptions{manual: true, tokens: b.tokens, dataDir: b.DataDir, storeURL: b.StoreURL})
}

type brokerOptions struct {
	manual   bool
	tokens   []TokenSpec
	dataDir  string
	storeURL string // the fleet store; "" is bbolt in the data dir
	config   string // YAML appended to the tokens section (limits:); needs tokens
}

// MustStartConfiguredBroker starts a wall-clock broker whose configuration
// file holds tokens and then config (a `limits:` section).
func MustStartConfiguredBroker(tb testing.TB, config string, tokens ...TokenSpec) *Broker {
	tb.Helper()
	return startBroker(tb, brokerOptions{tokens: tokens, config: config})
}

// MustStartBrokerOn is MustStartBroker with the fleet store at storeURL
// ("" is bbolt in the data dir; see fleetBackends).
func MustStartBrokerOn(tb testing.TB, storeURL string, tokens ...TokenSpec) *Broker {
	tb.Helper()
	return startBroker(tb, brokerOptions{manual: true, tokens: tokens, storeURL: storeURL})
}

// MustStartWallClockBroker starts a broker on the wall clock, for tests in
// which time passes for real (expiry under concurrency).
func MustStartWallClockBroker(tb testing.TB, tokens ...TokenSpec) *Broker {
	tb.Helper()
	return startBroker(tb, brokerOptions{tokens: tokens})
}

func startBroker(tb testing.TB, o brokerOptions) *Broker {
	tb.Helper()
	dir := tb.TempDir()
	tokens := o.tokens
	m := app.NewMain()
	m.Addr = "127.0.0.1:0"
	m.DataDir = filepath.Join(dir, "data")
	if o.dataDir != "" {
		m.DataDir = o.dataDir
	}
	m.StoreURL = o.storeURL
	if len(tokens) > 0 {
		m.ConfigPath = filepath.Join(dir, "muster.yaml")
		if err := os.WriteFile(m.ConfigPath, []byte(musterbin.TokensConfig(tokens...)+o.config), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	b := &Broker{Main: m, Logs: &syncBuffer{}, tokens: tokens, events: &eventLog{}}
	m.EventLog = b.events.add
	if o.manual {
		b.Clock = manualclock.New(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
		m.Clock = b.Clock
	}
	m.Logger = slog.New(slog.NewJSONHandler(b.Logs, nil))
	if err := m.Open(); err != nil {
		tb.Fatalf("start broker: %v", err)
	}
	tb.Cleanup(func() {
		if b.closed {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			tb.Errorf("stop broker: %v", err)
		}
	})
	return b
}

// Response is a read response whose body was validated against the contract.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r *Response) JSON(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Problem decodes a problem body.
func (r *Response) Problem(tb testing.TB) (code string, detail string) {
	tb.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("status %d content-type %q, want application/problem+json; body %s", r.Status, ct, r.Body)
	}
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
		Status int    `json:"status"`
	}
	r.JSON(tb, &p)
	if p.Status != r.Status {
		tb.Fatalf("problem status %d != HTTP status %d", p.Status, r.Status)
	}
	return p.Code, p.Detail
}

// Request describes one call.
type Request struct {
	Method, Path string
	Token        string
	Body         any // string/[]byte sent raw; anything else as JSON
	ContentType  string
	Header       map[string]string
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// Do sends req and validates the response against openapi.yaml when the
// route is part of the contract. Every response must carry Muster-Epoch.
func (b *Broker) Do(tb testing.TB, req Request) *Response {
	tb.Helper()
	var body io.Reader
	ct := req.ContentType
	switch v := req.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(v)
	case []byte:
		body = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		body = bytes.NewReader(data)
	}
	if body != nil && ct == "" {
		ct = "application/json"
	}
	hr, err := http.NewRequest(req.Method, b.URL()+req.Path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if ct != "" {
		hr.Header.Set("Content-Type", ct)
	}
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	resp, err := httpClient.Do(hr)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if got := resp.Header.Get("Muster-Epoch"); got != b.Epoch() {
		tb.Errorf("%s %s: Muster-Epoch = %q, want %q", req.Method, req.Path, got, b.Epoch())
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
	validateResponse(tb, hr, out)
	return out
}

// validateResponse checks a response against the operation it answers. A
// request that matches no operation of the contract must be answered with a
// problem body.
func validateResponse(tb testing.TB, hr *http.Request, out *Response) {
	tb.Helper()
	route, params, err := contractRouter(tb).FindRoute(hr)
	if err != nil {
		if out.Status < 400 && !strings.HasPrefix(hr.URL.Path, "/docs/") {
			tb.Errorf("%s %s is outside the contract but answered %d", hr.Method, hr.URL.Path, out.Status)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: hr, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: out.Status,
		Header: out.Header,
		Body:   io.NopCloser(bytes.NewReader(out.Body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			ExcludeResponseBody:   strings.HasPrefix(out.Header.Get("Content-Type"), "text/html"),
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		tb.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %.500s", hr.Method, hr.URL.Path, out.Status, err, out.Body)
	}
}
