package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// gate makes requests (or stream reads) wait while it is held.
type gate struct {
	mu      sync.Mutex
	held    bool
	release chan struct{}
	waiting int
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		g.held, g.release = true, make(chan struct{})
	}
}

func (g *gate) unhold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.release)
	}
}

// pass waits while the gate is held (or until ctx ends).
func (g *gate) pass(ctx context.Context) {
	g.mu.Lock()
	if !g.held {
		g.mu.Unlock()
		return
	}
	g.waiting++
	ch := g.release
	g.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.waiting--
	g.mu.Unlock()
}

func (g *gate) isWaiting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting > 0
}

// proxy stands between observers and the broker: it can hold LIST pages
// that carry a cursor, stall watch streams (it stops reading them from the
// broker, so the broker's queue fills as with a slow reader), drop change
// events, and counts what passes. The broker keeps its address across
// restarts and resets, so the target never changes.
type proxy struct {
	target     string
	tr         *http.Transport
	pages      gate
	streams    gate
	dropping   atomic.Bool
	watchOpens atomic.Int64

	mu   sync.Mutex
	seen map[string]int // event names seen on watch streams
}

func newProxy(target string) *proxy {
	dialer := &net.Dialer{Control: smallReceiveBuffer}
	return &proxy{
		target: target,
		tr:     &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64, ReadBufferSize: 4096},
		seen:   map[string]int{},
	}
}

// reset opens both gates, stops dropping and zeroes the counters.
func (p *proxy) reset() {
	p.pages.unhold()
	p.streams.unhold()
	p.dropping.Store(false)
	p.watchOpens.Store(0)
	p.mu.Lock()
	p.seen = map[string]int{}
	p.mu.Unlock()
	p.tr.CloseIdleConnections()
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	watch := r.URL.Path == "/v1/leases/watch"
	if r.URL.Path == "/v1/leases" && r.URL.Query().Has("cursor") {
		p.pages.pass(ctx)
	}
	if watch {
		p.watchOpens.Add(1)
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !watch || resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	p.copyStream(ctx, w, resp.Body)
}

// copyStream forwards a watch stream event by event.
func (p *proxy) copyStream(ctx context.Context, w http.ResponseWriter, body io.Reader) {
	fl := w.(http.Flusher)
	fl.Flush()
	br := bufio.NewReaderSize(body, 4096)
	var block bytes.Buffer
	name := ""
	for {
		p.streams.pass(ctx)
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		block.Write(line)
		if err == bufio.ErrBufferFull {
			continue
		}
		if n, ok := strings.CutPrefix(strings.TrimRight(string(line), "\r\n"), "event: "); ok {
			name = n
		}
		if len(bytes.TrimRight(line, "\r\n")) > 0 {
			continue
		}
		if name != "" {
			p.mu.Lock()
			p.seen[name]++
			p.mu.Unlock()
		}
		if !(name == "change" && p.dropping.Load()) {
			if _, err := w.Write(block.Bytes()); err != nil {
				return
			}
			fl.Flush()
		}
		block.Reset()
		name = ""
	}
}

// counts describes what passed the proxy, for failure details.
func (p *proxy) counts() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%d watch opens, events seen %v", p.watchOpens.Load(), p.seen)
}

func (p *proxy) sawEvent(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[name] > 0
}

// waitFor polls cond every 10 ms for up to d (at least once).
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
