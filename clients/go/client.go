package muster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/musterhq/muster/clients/go/api"
)

// maxBody bounds the bytes read from one non-streaming response.
const maxBody = 32 << 20

// Client talks to one broker. It is safe for concurrent use and holds no
// state besides its configuration and the last epoch it saw.
type Client struct {
	base  string
	token string
	hc    *http.Client // for request/response calls
	sse   *http.Client // the same transport without a client timeout, for streams
	raw   *api.Client

	mu       sync.Mutex
	epoch    string
	sessions map[*Session]struct{} // live sessions, for prompt loss (loss.go)

	caFile    string // WithCAFile
	noFollow  bool
	follow    *follower
	neverLost bool // conformance tests only (brokenNeverLost): a lease's loss is never reported
	// sendPlusTTL: conformance tests only (brokenSendPlusTTL): a grant's
	// local deadline is send + TTL, ignoring expires_after_request_ms.
	sendPlusTTL bool
	// lateLoss: conformance tests only (brokenLateLoss): sessions are lost
	// at their keepalive only, never promptly (loss.go).
	lateLoss bool
	// creatorLoss: conformance tests only (brokenCreatorLoss): a session's
	// broker stays the one that created it (session.go, Session.call).
	creatorLoss bool
	// single: conformance tests only (brokenSingleBroker): every base URL
	// but the first is ignored.
	single bool
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer token of every request. A broker in
// dev mode accepts requests without one.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc for every request. Its Timeout, if any, applies to
// request/response calls only: watch streams use a copy without it (a stream
// is ended by its context or Close instead). A long-polling Acquire needs a
// Timeout longer than its wait.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the broker at baseURL (e.g.
// "http://127.0.0.1:7420"), or of a deployment of several brokers:
// baseURL may list their base URLs separated by commas, in order of
// preference, as MUSTER_ADDR may (docs/client-operations.md, "Several
// brokers").
func New(baseURL string, opts ...Option) (*Client, error) {
	bases, err := parseBases(baseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: bases[0].String(), hc: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	if c.single {
		bases = bases[:1]
	}
	hc := *c.hc
	if c.caFile != "" {
		if err := trustCAFile(&hc, c.caFile); err != nil {
			return nil, err
		}
	}
	c.follow = &follower{next: hc.Transport, bases: bases, noFollow: c.noFollow,
		unavailable: func(host string) { c.brokerGone(host, "") }}
	if c.follow.next == nil {
		c.follow.next = http.DefaultTransport
	}
	hc.Transport = c.follow
	c.hc = &hc
	sse := *c.hc
	sse.Timeout = 0
	c.sse = &sse
	c.raw, err = api.NewClient(c.base, api.WithHTTPClient(c.hc), api.WithRequestEditorFn(c.authorize))
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Raw is the generated low-level client, configured with this client's base
// URL, token and http.Client. Its responses are not checked or decoded.
func (c *Client) Raw() *api.Client { return c.raw }

// Epoch is the broker lifetime (the Muster-Epoch header) of the last
// response, "" before the first one.
func (c *Client) Epoch() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

func (c *Client) authorize(_ context.Context, req *http.Request) error {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return nil
}

func (c *Client) sawEpoch(resp *http.Response) {
	if e := resp.Header.Get("Muster-Epoch"); e != "" {
		c.mu.Lock()
		c.epoch = e
		c.mu.Unlock()
		c.brokerGone(answeredBy(resp), e)
	}
}

// call runs one request/response operation: resp is the answer of send; a
// status other than want becomes an *Error; out (if not nil) receives the
// JSON body.
func (c *Client) call(resp *http.Response, err error, want int, out any) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	c.sawEpoch(resp)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return c.problem(resp, body)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("muster: decoding a %d answer: %w", resp.StatusCode, err)
	}
	return nil
}

// problem is problemError for an answer of this client's: a
// family_unavailable from a session's broker ends its sessions (loss.go).
func (c *Client) problem(resp *http.Response, body []byte) error {
	perr := problemError(resp, body)
	if errors.Is(perr, ErrFamilyUnavailable) {
		c.brokerGone(answeredBy(resp), "")
	}
	return perr
}

// problemError turns a non-success answer into an *Error: the problem body's
// code when there is one; otherwise a code derived from the status, so a
// gateway's 502 is still advised as retryable.
func problemError(resp *http.Response, body []byte) error {
	e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p api.Problem
	if (mt == "application/problem+json" || mt == "application/json") &&
		json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code = Code(p.Code)
		if p.Title != "" {
			e.Title = p.Title
		}
		if p.Detail != nil {
			e.Detail = *p.Detail
		}
		if p.Scope != nil {
			e.Scope = *p.Scope
		}
		if p.Owner != nil {
			e.Owner = *p.Owner
		}
		return e
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.Code = ErrUnavailable.Code
	case http.StatusNotFound:
		e.Code = ErrNotFound.Code
	case http.StatusUnauthorized:
		e.Code = ErrUnauthenticated.Code
	case http.StatusForbidden:
		e.Code = ErrForbidden.Code
	case http.StatusRequestEntityTooLarge:
		e.Code = ErrPayloadTooLarge.Code
	default:
		e.Code = ErrInternal.Code
	}
	e.Detail = fmt.Sprintf("HTTP %d without a problem body: %s", resp.StatusCode, bytes.TrimSpace(truncate(body, 200)))
	return e
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
