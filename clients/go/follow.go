package muster

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"
)

// WithoutFollow turns off following wrong_broker answers: a request for a
// family that another broker serves then fails with ErrWrongBroker, whose
// Owner names that broker.
func WithoutFollow() Option { return func(c *Client) { c.noFollow = true } }

// maxFollows bounds the brokers one request is sent to after the first.
const maxFollows = 2

// follower is the transport of a multi-broker deployment's client
// (docs/placement.md): a 421 wrong_broker answer names the broker that
// serves the caller's family; the request is sent there instead, and every
// later request goes there directly. A 421 means the broker did nothing, so
// resending is safe for every operation. The owner comes from a broker of
// the deployment, which the client trusts with its token already.
type follower struct {
	next http.RoundTripper

	mu    sync.Mutex
	owner *url.URL // where requests go; nil: the base URL they name

	sticky bool // conformance tests only (brokenStickyOwner): never forget owner
}

// Owner is the base URL the client was last sent to ("" when none).
func (f *follower) Owner() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner == nil {
		return ""
	}
	return f.owner.String()
}

func (f *follower) RoundTrip(req *http.Request) (*http.Response, error) {
	for hop := 0; ; hop++ {
		out := req
		f.mu.Lock()
		owner := f.owner
		f.mu.Unlock()
		if owner != nil {
			out = req.Clone(req.Context())
			out.URL.Scheme, out.URL.Host, out.Host = owner.Scheme, owner.Host, ""
		}
		if hop > 0 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, errors.New("muster: cannot resend the request to the family's broker")
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			if out == req {
				out = req.Clone(req.Context())
			}
			out.Body = body
		}
		resp, err := f.next.RoundTrip(out)
		if err != nil && owner != nil && !f.sticky {
			// The owner we were sent to is gone (a failover): the next
			// request asks the configured broker again.
			f.mu.Lock()
			if f.owner == owner {
				f.owner = nil
			}
			f.mu.Unlock()
		}
		if err != nil || resp.StatusCode != http.StatusMisdirectedRequest || hop >= maxFollows {
			return resp, err
		}
		to, ok := misdirectedTo(resp)
		if !ok {
			return resp, nil
		}
		f.mu.Lock()
		f.owner = to
		f.mu.Unlock()
	}
}

// misdirectedTo reads a 421 answer: the owner of a wrong_broker problem.
// When it is not one, the body is restored and false returned.
func misdirectedTo(resp *http.Response) (*url.URL, bool) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p struct {
		Code  string `json:"code"`
		Owner string `json:"owner"`
	}
	if mt != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Code != string(ErrWrongBroker.Code) {
		return nil, false
	}
	u, err := url.Parse(p.Owner)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}
