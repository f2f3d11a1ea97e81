package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// storeLink is a placed broker's way to PostgreSQL: a TCP relay the harness
// can cut (cut_store) and heal (heal_store). Cut, it closes every relayed
// connection and refuses new ones (accepted, then closed at once), so the
// broker can neither renew its claims nor read them: at its serving deadline
// it stops serving its families and answers family_unavailable, while the
// other brokers take them over (docs/placement.md).
type storeLink struct {
	ln     net.Listener
	target string // host:port of the PostgreSQL server

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

// newStoreLink relays to the server of the PostgreSQL URL store and
// returns the URL that goes through the link.
func newStoreLink(store string) (*storeLink, string, error) {
	u, err := url.Parse(store)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("store URL: want postgres://host:port/…")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	l := &storeLink{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
	go l.serve()
	u.Host = ln.Addr().String()
	return l, u.String(), nil
}

func (l *storeLink) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		go l.relay(c)
	}
}

func (l *storeLink) relay(c net.Conn) {
	s, err := net.Dial("tcp", l.target)
	if err != nil {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.cut {
		l.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	l.conns[c], l.conns[s] = true, true
	l.mu.Unlock()
	done := func() {
		c.Close()
		s.Close()
		l.mu.Lock()
		delete(l.conns, c)
		delete(l.conns, s)
		l.mu.Unlock()
	}
	go func() { _, _ = io.Copy(s, c); done() }()
	_, _ = io.Copy(c, s)
	done()
}

// setCut cuts (true) or heals (false) the link.
func (l *storeLink) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for c := range l.conns {
			c.Close()
		}
		clear(l.conns)
	}
}

// close stops the relay and closes every connection.
func (l *storeLink) close() {
	l.ln.Close()
	l.setCut(true)
}
