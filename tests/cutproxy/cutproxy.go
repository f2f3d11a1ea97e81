// Package cutproxy is a TCP proxy that tests put between a broker and
// PostgreSQL to cut the broker off while everything else keeps running.
//
// A cut is silent, as a partition is: open connections stay open but no byte
// crosses them in either direction, and new connections are accepted and
// then left hanging. Nothing is reset, so the client learns of the cut only
// through its own timeouts. Heal lets bytes flow again on the connections
// opened after it; the connections that were open during the cut are closed
// by Heal (a real partition that lasts longer than TCP's patience ends them
// too).
package cutproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection accepted on Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wake  chan struct{} // closed and replaced by Heal
	wg    sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target. The proxy is
// closed when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, wake: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops every byte from crossing, on open and new connections alike.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal closes the connections that lived through the cut and lets new ones
// through.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	for c := range p.conns {
		_ = c.Close()
	}
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target (waiting while cut) and pumps both ways.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.forget(c)
	defer c.Close()
	if !p.waitHealed(c) {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(up)
	defer p.forget(up)
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.pump(up, c); done <- struct{}{} }()
	go func() { p.pump(c, up); done <- struct{}{} }()
	<-done
}

// waitHealed blocks while the proxy is cut; false when c closed meanwhile.
func (p *Proxy) waitHealed(c net.Conn) bool {
	for {
		p.mu.Lock()
		cut, wake := p.cut, p.wake
		p.mu.Unlock()
		if !cut {
			return true
		}
		closed := make(chan struct{})
		go func() {
			var b [1]byte
			_, _ = c.Read(b[:]) // a client that gives up closes; data while cut is dropped
			close(closed)
		}()
		select {
		case <-wake:
			// The reader goroutine may swallow a byte: the connection is
			// closed by Heal anyway when it was open during the cut.
			return false
		case <-closed:
			return false
		}
	}
}

// pump copies src to dst, dropping (not forwarding) what arrives while cut:
// a cut connection hangs until Heal or Close closes it.
func (p *Proxy) pump(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.cut
			p.mu.Unlock()
			if !cut {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
