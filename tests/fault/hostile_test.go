package fault

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/musterhq/muster/tests/hostile"
)

// The hostile family's requests, from the abuse report, sent while the
// workload runs. Each must be refused quickly and leave the other families
// alone. Each kind is sent at hostileRate: the campaign measures what each
// hostile request costs the others, not raw volume (a flood of requests of
// any kind is for a rate limiter in front of the broker).

// hostileRate is how often each hostile generator sends a request.
const hostileRate = 50 * time.Millisecond

func (w *workload) hostileSweeps(ctx context.Context) {
	body := `{"schema":` + hostile.Schema(25) + `}`
	for ctx.Err() == nil {
		if !w.on() {
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		start := time.Now()
		st, resp, _ := do(ctx, client, "POST", w.b.url()+"/v1/fleets/hostile/sweep", hostileTok.Secret, body)
		took := time.Since(start)
		if st == 0 {
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		w.l.mu.Lock()
		w.l.hostile.sweeps++
		w.l.hostile.sweepMax = max(w.l.hostile.sweepMax, took)
		w.l.mu.Unlock()
		if st != 400 || !strings.Contains(string(resp), "$ref expansion") {
			w.l.violate("hostile sweep answered %d: %.200s", st, resp)
		}
		sleep(ctx, hostileRate)
	}
}

// slowBodies keeps 20 connections trickling a body, without a token.
func (w *workload) slowBodies(ctx context.Context) {
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if !w.on() {
					sleep(ctx, 10*time.Millisecond)
					continue
				}
				lived, ok := trickle(ctx, w.b.addr)
				if !ok {
					sleep(ctx, 20*time.Millisecond)
					continue
				}
				w.l.mu.Lock()
				w.l.hostile.slow++
				w.l.hostile.slowMax = max(w.l.hostile.slowMax, lived)
				w.l.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// trickle announces 16,000 bytes and sends one every 100 ms until the
// broker closes the connection; false if the round ended first.
func trickle(ctx context.Context, addr string) (time.Duration, bool) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: muster\r\nContent-Type: application/json\r\nContent-Length: 16000\r\n\r\n{")
	closed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
	for {
		select {
		case <-closed:
			return time.Since(start), true
		case <-ctx.Done():
			return 0, false
		case <-time.After(100 * time.Millisecond):
			_, _ = c.Write([]byte(" "))
		}
	}
}

// sessionFlood creates sessions with a read-only token until the family's
// quota answers 429, then keeps trying.
func (w *workload) sessionFlood(ctx context.Context) {
	for ctx.Err() == nil {
		if !w.on() {
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		st, body, _ := do(ctx, client, "POST", w.b.url()+"/v1/sessions", hostileTok.Secret, `{"owner_id":"flood","ttl_ms":5000}`)
		switch st {
		case 201:
			w.l.mu.Lock()
			w.l.hostile.sessions++
			w.l.mu.Unlock()
			sleep(ctx, hostileRate)
		case 429:
			var p struct {
				Scope string `json:"scope"`
			}
			_ = json.Unmarshal(body, &p)
			w.l.mu.Lock()
			w.l.hostile.sessionScope = p.Scope
			w.l.mu.Unlock()
			sleep(ctx, hostileRate)
		default:
			sleep(ctx, 20*time.Millisecond)
		}
	}
}

// streamFlood opens read-only watch streams until the family's quota
// answers 429, reading what they send, and closes them when the round ends.
func (w *workload) streamFlood(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		if !w.on() {
			sleep(ctx, 10*time.Millisecond)
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", w.b.url()+"/v1/leases/watch?selector="+url.QueryEscape("lease://hostile/**"), nil)
		req.Header.Set("Authorization", "Bearer "+hostileTok.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		if resp.StatusCode == 429 {
			var p struct {
				Scope string `json:"scope"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
			w.l.mu.Lock()
			w.l.hostile.streamScope = p.Scope
			w.l.mu.Unlock()
			sleep(ctx, hostileRate)
			continue
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
			sleep(ctx, 20*time.Millisecond)
			continue
		}
		w.l.mu.Lock()
		w.l.hostile.streams++
		w.l.mu.Unlock()
		sleep(ctx, hostileRate)
		wg.Go(func() {
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		})
	}
}
