package muster

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// misdirect answers every request 421 wrong_broker naming owner.
func misdirect(owner *string, hits *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Misdirected Request","status":421,"code":"wrong_broker","owner":"`+*owner+`"}`)
	}
}

// createSession sends one create-session request (no keepalive loop).
func createSession(ctx context.Context, c *Client) error {
	var out api.Session
	resp, err := c.Raw().CreateSession(ctx, api.CreateSessionRequest{OwnerId: "w", TtlMs: 10000})
	return c.call(resp, err, 201, &out)
}

func TestFollowsWrongBroker(t *testing.T) {
	var ownerHits, otherHits atomic.Int32
	var gotBody atomic.Value
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ownerHits.Add(1)
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"session_id":"0123456789abcdef0123456789abcdef","holder_incarnation":"h","owner_id":"w","ttl_ms":10000,"expires_at":"2030-01-01T00:00:00Z","epoch":"e"}`)
	}))
	defer owner.Close()
	ownerURL := owner.URL
	other := httptest.NewServer(misdirect(&ownerURL, &otherHits))
	defer other.Close()

	c, err := New(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := createSession(ctx, c); err != nil {
		t.Fatalf("session through a misdirect: %v", err)
	}
	if otherHits.Load() != 1 || ownerHits.Load() != 1 {
		t.Fatalf("hits: other %d owner %d, want 1 and 1", otherHits.Load(), ownerHits.Load())
	}
	if b, _ := gotBody.Load().(string); b == "" {
		t.Fatal("the followed request lost its body")
	}
	if c.follow.Owner() != ownerURL {
		t.Fatalf("owner %q, want %q", c.follow.Owner(), ownerURL)
	}
}

func TestFollowGivesUpOnALoop(t *testing.T) {
	var aHits, bHits atomic.Int32
	var aURL, bURL string
	a := httptest.NewServer(misdirect(&bURL, &aHits))
	defer a.Close()
	b := httptest.NewServer(misdirect(&aURL, &bHits))
	defer b.Close()
	aURL, bURL = a.URL, b.URL
	c, err := New(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = createSession(context.Background(), c)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrWrongBroker.Code || e.Owner == "" {
		t.Fatalf("err = %v, want wrong_broker with its owner", err)
	}
	if n := aHits.Load() + bHits.Load(); n != 1+maxFollows {
		t.Fatalf("%d requests, want %d", n, 1+maxFollows)
	}

	c2, _ := New(a.URL, WithoutFollow())
	err = createSession(context.Background(), c2)
	if !errors.Is(err, ErrWrongBroker) {
		t.Fatalf("without follow: %v", err)
	}
}

// FuzzMisdirectedTo: any 421 body is either followed to an http(s) URL with
// a host, or left alone with its body intact for the caller to read.
func FuzzMisdirectedTo(f *testing.F) {
	f.Add(`{"code":"wrong_broker","owner":"http://10.0.0.2:7420"}`, "application/problem+json")
	f.Add(`{"code":"wrong_broker","owner":"javascript:alert(1)"}`, "application/problem+json")
	f.Add(`{"code":"wrong_broker"}`, "application/problem+json")
	f.Add(`{"code":"not_owner","owner":"http://x"}`, "application/problem+json")
	f.Add(`not json`, "text/plain")
	f.Fuzz(func(t *testing.T, body, ctype string) {
		resp := &http.Response{StatusCode: 421, Header: http.Header{"Content-Type": {ctype}}, Body: io.NopCloser(strings.NewReader(body))}
		u, ok := misdirectedTo(resp)
		if ok && (u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			t.Fatalf("followed to %v", u)
		}
		rest, _ := io.ReadAll(resp.Body)
		if len(body) <= 64<<10 && string(rest) != body {
			t.Fatalf("body not restored: %q", rest)
		}
	})
}

// sessionCreated answers every request 201 with a session, counting hits.
func sessionCreated(hits *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"session_id":"0123456789abcdef0123456789abcdef","holder_incarnation":"h","owner_id":"w","ttl_ms":10000,"expires_at":"2030-01-01T00:00:00Z","epoch":"e"}`)
	}
}

// refusedURL is the base URL of a loopback port nobody listens on.
func refusedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestSeveralBrokersDeadFirst(t *testing.T) {
	var hits atomic.Int32
	live := httptest.NewServer(sessionCreated(&hits))
	defer live.Close()
	c, err := New(refusedURL(t) + ", " + live.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The refused connection is resent at once: the first call succeeds.
	for i := range 3 {
		if err := createSession(ctx, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if hits.Load() != 3 {
		t.Fatalf("live broker hits %d, want 3", hits.Load())
	}
}

func TestFamilyUnavailableMovesOn(t *testing.T) {
	var unavailableHits, liveHits atomic.Int32
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		unavailableHits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503,"code":"family_unavailable"}`)
	}))
	defer unavailable.Close()
	live := httptest.NewServer(sessionCreated(&liveHits))
	defer live.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c, err := New(unavailable.URL + "," + live.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := createSession(ctx, c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if unavailableHits.Load() != 1 || liveHits.Load() != 2 {
		t.Fatalf("hits: unavailable %d, live %d; want 1 and 2 (moved on for good)", unavailableHits.Load(), liveHits.Load())
	}

	// One base URL: the answer is the caller's (retry with backoff).
	one, err := New(unavailable.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := createSession(ctx, one); !errors.Is(err, ErrFamilyUnavailable) {
		t.Fatalf("one unavailable broker: %v, want ErrFamilyUnavailable", err)
	}
}

func TestMoveOnOncePerFailure(t *testing.T) {
	bases, err := parseBases("http://a:1,http://b:2,http://c:3")
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{bases: bases}
	a := f.target()
	f.moveOn(a)
	f.moveOn(a) // a second request that failed at a: the client moved already
	if got := f.target(); got != bases[1] {
		t.Fatalf("target %v, want %v", got, bases[1])
	}
	f.moveOn(bases[1])
	f.moveOn(bases[2])
	if got := f.target(); got != bases[0] {
		t.Fatalf("after the last, target %v, want the first again", got)
	}
}

func TestParseBases(t *testing.T) {
	for _, bad := range []string{"", "http://a:1,", "ftp://a", "http://a:1, b:2", "http://"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	bases, err := parseBases(" http://a:1/ ,https://b")
	if err != nil || len(bases) != 2 || bases[0].String() != "http://a:1" || bases[1].String() != "https://b" {
		t.Fatalf("parseBases: %v %v", bases, err)
	}
}
