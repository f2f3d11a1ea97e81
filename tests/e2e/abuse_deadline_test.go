package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

const bodyTimeout = time.Second

var deadlineTok = TokenSpec{Secret: "deadline-secret", Family: "acme", Grants: []string{"lease://acme/**#*", "fleet://acme/**#*"}}

func startDeadlineBroker(t *testing.T) *Broker {
	t.Helper()
	return MustStartConfiguredBroker(t, fmt.Sprintf("limits:\n  body_read_timeout: %s\n", bodyTimeout), deadlineTok)
}

// slowBody opens a raw connection, sends the head of a request announcing a
// 16,000-byte body, and then one byte every 100 ms until the server closes
// the connection or giveUp passes. It returns the status line the server
// answered (if any) and how long the connection lived.
func slowBody(t testing.TB, addr, method, path, auth string, giveUp time.Duration) (status string, lived time.Duration) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return "", 0
	}
	defer c.Close()
	start := time.Now()
	head := method + " " + path + " HTTP/1.1\r\nHost: muster\r\nContent-Type: application/json\r\nContent-Length: 16000\r\n"
	if auth != "" {
		head += "Authorization: Bearer " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
		t.Error(err)
		return "", 0
	}
	closed := make(chan string, 1)
	go func() {
		r := bufio.NewReader(c)
		line, _ := r.ReadString('\n')
		_, _ = io.Copy(io.Discard, r) // until the server closes
		closed <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case status = <-closed:
			return status, time.Since(start)
		case <-tick.C:
			if time.Since(start) > giveUp {
				return "", time.Since(start)
			}
			_, _ = c.Write([]byte(" ")) // progress, of a kind
		}
	}
}

// A body that trickles in is cut off when the body read deadline passes,
// on every path: unauthenticated (401, the server drains the unread body),
// authenticated (the body is read for validation), and no route at all.
func TestBodyReadDeadline(t *testing.T) {
	b := startDeadlineBroker(t)
	addr := strings.TrimPrefix(b.URL(), "http://")
	limit := bodyTimeout + time.Second
	for _, tt := range []struct {
		name, method, path, auth, status string
	}{
		{"Unauthenticated", "POST", "/v1/sessions", "", "HTTP/1.1 401 Unauthorized"},
		{"Authenticated", "POST", "/v1/sessions", deadlineTok.Secret, "HTTP/1.1 400 Bad Request"},
		{"Fleet", "POST", "/v1/fleets/x/specs", deadlineTok.Secret, "HTTP/1.1 400 Bad Request"},
		{"NoRoute", "POST", "/nowhere", "", "HTTP/1.1 404 Not Found"},
		{"Public", "POST", "/healthz", "", "HTTP/1.1 405 Method Not Allowed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, lived := slowBody(t, addr, tt.method, tt.path, tt.auth, 10*time.Second)
			if lived > limit {
				t.Fatalf("the connection lived %v (deadline %v)", lived, bodyTimeout)
			}
			if status != tt.status {
				t.Errorf("answer %q, want %q", status, tt.status)
			}
			t.Logf("%s: %q, connection closed after %v", tt.name, status, lived)
		})
	}

	// Hundreds at once, without a token: every connection is gone within
	// the deadline (plus scheduling), and so are their goroutines.
	before := runtime.NumGoroutine()
	const n = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	var longest time.Duration
	for range n {
		wg.Go(func() {
			_, lived := slowBody(t, addr, "POST", "/v1/sessions", "", 10*time.Second)
			mu.Lock()
			longest = max(longest, lived)
			mu.Unlock()
		})
	}
	wg.Wait()
	if longest > limit+time.Second {
		t.Errorf("of %d slow connections the longest lived %v", n, longest)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+10 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before+10 {
		t.Errorf("goroutines: %d before, %d after the slow connections", before, g)
	}
	t.Logf("%d slow connections: the longest lived %v; goroutines %d before, %d after", n, longest, before, runtime.NumGoroutine())

	// The broker still answers.
	if resp := b.Do(t, Request{Method: "POST", Path: "/v1/sessions", Token: deadlineTok.Secret, Body: map[string]any{"owner_id": "w", "ttl_ms": 10000}}); resp.Status != 201 {
		t.Fatalf("after the slow connections: %d %s", resp.Status, resp.Body)
	}
}

// The deadline covers the reading of the body only: a long-polling acquire
// waits past it, and a watch stream (no body) lives past it.
func TestBodyDeadlineSparesLongRequests(t *testing.T) {
	b := startDeadlineBroker(t)
	tok := deadlineTok.Secret
	const route = "lease://acme/r/one"
	holder := createSession(t, b, tok, "holder", 30000)
	waiter := createSession(t, b, tok, "waiter", 30000)
	acquire := func(sess string, waitMs int) *Response {
		return b.Do(t, Request{Method: "POST", Path: leasePath(route) + "/acquire", Token: tok,
			Body: map[string]any{"session_id": sess, "ttl_ms": 10000, "wait_ms": waitMs}})
	}
	resp := acquire(holder, 0)
	if resp.Status != 200 {
		t.Fatalf("acquire: %d %s", resp.Status, resp.Body)
	}
	var held leaseBody
	resp.JSON(t, &held)

	ws := b.openWatch(t, watchOpts{token: tok}, "lease://acme/r/*")
	defer ws.close()
	ws.marker(t)

	got := make(chan *Response, 1)
	start := time.Now()
	go func() { got <- acquire(waiter, 5000) }()
	time.Sleep(2 * bodyTimeout)
	if r := b.Do(t, Request{Method: "POST", Path: leasePath(route) + "/release", Token: tok,
		Body: map[string]any{"session_id": holder, "fencing_token": held.FencingToken}}); r.Status != 204 {
		t.Fatalf("release: %d %s", r.Status, r.Body)
	}
	r := <-got
	if r.Status != 200 {
		t.Fatalf("the waiting acquire: %d %s after %v", r.Status, r.Body, time.Since(start))
	}
	t.Logf("a waiting acquire was granted after %v (body deadline %v)", time.Since(start), bodyTimeout)

	// The stream, open for more than twice the deadline, still delivers.
	for _, want := range []string{"released", "acquired"} {
		if c := ws.change(t); c.Kind != want {
			t.Fatalf("stream: %s, want %s", c.Kind, want)
		}
	}
	if _, err := http.Get(b.URL() + "/healthz"); err != nil {
		t.Fatal(err)
	}
}

// The deadline holds on cleartext HTTP/2 too: a request body that trickles
// on one stream is cut when the deadline passes.
func TestBodyReadDeadlineH2C(t *testing.T) {
	b := startDeadlineBroker(t)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, tok := range []string{deadlineTok.Secret, ""} {
		pr, pw := io.Pipe()
		go func() {
			defer pw.Close()
			if _, err := pw.Write([]byte("{")); err != nil {
				return
			}
			for range 100 {
				time.Sleep(100 * time.Millisecond)
				if _, err := pw.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		req, _ := http.NewRequest("POST", b.URL()+"/v1/sessions", pr)
		req.ContentLength = 16000
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("h2c: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		pr.CloseWithError(io.ErrClosedPipe)
		want := 400
		if tok == "" {
			want = 401
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != want || took > bodyTimeout+time.Second {
			t.Fatalf("h2c (token %v): %s %d after %v, want HTTP/2 %d within %v", tok != "", resp.Proto, resp.StatusCode, took, want, bodyTimeout+time.Second)
		}
		t.Logf("h2c (token %v): %d after %v", tok != "", resp.StatusCode, took)
	}
}
