package muster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// WithoutFollow turns off following wrong_broker answers: a request for a
// family that another broker serves then fails with ErrWrongBroker, whose
// Owner names that broker.
func WithoutFollow() Option { return func(c *Client) { c.noFollow = true } }

// maxFollows bounds the wrong_broker answers one request follows.
const maxFollows = 2

// parseBases reads the base URL argument of New: one base URL, or several
// separated by commas (as MUSTER_ADDR may hold them), in order of
// preference.
func parseBases(baseURLs string) ([]*url.URL, error) {
	var out []*url.URL
	for _, s := range strings.Split(baseURLs, ",") {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("muster: base URL %q: want http(s)://host[:port], or several separated by commas", s)
		}
		out = append(out, u)
	}
	return out, nil
}

// follower is the transport that picks the broker of every request
// (docs/client-operations.md, "Several brokers"). A request goes to the
// owner a wrong_broker answer named, else to the current base URL. A
// connection error or family_unavailable from that broker moves the client
// on: the owner is forgotten, or the current base URL becomes the next one.
// A request the broker certainly did not act on (the connection was
// refused, 421, family_unavailable) is sent again at once to the new
// target, each request reaching at most every base URL once plus
// maxFollows owners; any other failure is returned, and the caller's next
// attempt goes to the new target. An owner comes from a broker of the
// deployment, which the client trusts with its token already.
type follower struct {
	next     http.RoundTripper
	bases    []*url.URL
	noFollow bool
	// unavailable hears of every family_unavailable answer, also those
	// sent on to another broker (prompt loss: loss.go).
	unavailable func(host string)

	mu    sync.Mutex
	owner *url.URL // the owner a wrong_broker answer named; nil for none
	cur   int      // the current base URL

	sticky bool // conformance tests only (brokenStickyOwner): never forget owner
	stay   bool // conformance tests only (brokenStayOnUnavailable): family_unavailable moves nothing
}

// Owner is the base URL the client was last sent to by a wrong_broker
// answer ("" when none).
func (f *follower) Owner() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner == nil {
		return ""
	}
	return f.owner.String()
}

// target is where the next request goes.
func (f *follower) target() *url.URL {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner != nil {
		return f.owner
	}
	return f.bases[f.cur]
}

// moveOn leaves t, which failed: the owner is forgotten, or the current base
// URL becomes the next one (unless another request moved on already).
func (f *follower) moveOn(t *url.URL) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case t == f.owner:
		if !f.sticky {
			f.owner = nil
		}
	case f.owner == nil && t == f.bases[f.cur]:
		f.cur = (f.cur + 1) % len(f.bases)
	}
}

func (f *follower) RoundTrip(req *http.Request) (*http.Response, error) {
	follows, fails := 0, 0
	for sent := 0; ; sent++ {
		t := f.target()
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = t.Scheme, t.Host, ""
		if sent > 0 && req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, errors.New("muster: cannot resend the request to another broker")
			}
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			out.Body = body
		}
		resp, err := f.next.RoundTrip(out)
		if err != nil {
			if errors.Is(req.Context().Err(), context.Canceled) {
				return nil, err // the caller gave up: no broker failed
			}
			f.moveOn(t)
			if fails++; notSent(err) && fails < len(f.bases)+maxFollows {
				continue
			}
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable && isProblem(resp, ErrFamilyUnavailable.Code):
			if f.unavailable != nil {
				f.unavailable(t.Host)
			}
			if f.stay {
				return resp, nil
			}
			f.moveOn(t)
			if fails++; fails < len(f.bases)+maxFollows && (len(f.bases) > 1 || t != f.bases[0]) {
				_ = resp.Body.Close()
				continue
			}
			return resp, nil
		case resp.StatusCode == http.StatusMisdirectedRequest && !f.noFollow && follows < maxFollows:
			to, ok := misdirectedTo(resp)
			if !ok {
				return resp, nil
			}
			follows++
			f.mu.Lock()
			f.owner = to
			f.mu.Unlock()
			_ = resp.Body.Close()
			continue
		}
		return resp, nil
	}
}

// notSent reports whether err proves the request never reached a broker:
// the connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// readProblem reads a problem answer's code and owner, restoring the body.
func readProblem(resp *http.Response) (code, owner string) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p struct {
		Code  string `json:"code"`
		Owner string `json:"owner"`
	}
	if err != nil || mt != "application/problem+json" || json.Unmarshal(body, &p) != nil {
		return "", ""
	}
	return p.Code, p.Owner
}

// isProblem reports whether resp is a problem answer of code (the body is
// restored).
func isProblem(resp *http.Response, code Code) bool {
	c, _ := readProblem(resp)
	return c == string(code)
}

// misdirectedTo reads a 421 answer: the owner of a wrong_broker problem.
// When it is not one, false is returned (the body is restored).
func misdirectedTo(resp *http.Response) (*url.URL, bool) {
	code, owner := readProblem(resp)
	if code != string(ErrWrongBroker.Code) {
		return nil, false
	}
	u, err := url.Parse(owner)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}
