package app

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimit is the broker's listener: it admits a connection only while
// fewer than maxOpen are open in all and fewer than perAddress come from
// the connection's client address (an IPv4 address, or the /64 of an IPv6
// one: one host holds a whole /64). Any other connection is closed the
// moment it is accepted, with a reset and without a byte read or written
// (no HTTP parsing, no goroutine), counted in
// muster_connections_refused_total and logged within a lineBudget; Accept
// then goes on to the next one. So a client holding idle connections can
// take neither the broker's file descriptors nor every other client's
// turn.
//
// An admitted connection is counted until its first Close. Accept errors
// (EMFILE, …) are returned as they are: http.Server backs off on them (5 ms
// doubling to 1 s) and logs them through its ErrorLog.
type connLimit struct {
	net.Listener
	maxOpen, perAddress int
	logger              *slog.Logger
	budget              *lineBudget
	refusedVec          *prometheus.CounterVec
	refused             [2]prometheus.Counter // refusedVec's series, by reason

	mu     sync.Mutex
	open   int
	byAddr map[netip.Addr]int
}

// Reasons for refusing a connection, the label of
// muster_connections_refused_total.
const (
	refusedAddress = iota // the client address holds perAddress connections
	refusedTotal          // the broker holds maxOpen connections
)

var refusedReasons = [2]string{"address", "total"}

// newConnLimit wraps ln; suppressed counts the refusal lines its budget
// drops (source "connections").
func newConnLimit(ln net.Listener, maxOpen, perAddress int, logger *slog.Logger, suppressed *prometheus.CounterVec) *connLimit {
	l := &connLimit{Listener: ln, maxOpen: maxOpen, perAddress: perAddress, logger: logger,
		budget: newLineBudget(logger, "connections", suppressed), byAddr: map[netip.Addr]int{}}
	l.refusedVec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "muster_connections_refused_total",
		Help: "Connections closed as soon as accepted, by reason: address (its client address was at limits.connections_per_address), total (the broker was at its connection cap)."},
		[]string{"reason"})
	for i, r := range refusedReasons {
		l.refused[i] = l.refusedVec.WithLabelValues(r)
	}
	return l
}

// collectors are connLimit's instruments, to register.
func (l *connLimit) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		l.refusedVec,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_connections_open",
			Help: "Connections open now (admitted and not yet closed)."},
			func() float64 { return float64(l.openNow()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_connections_limit",
			Help: "The connection cap in force: limits.connections, or less when the file descriptor limit allows less."},
			func() float64 { total, _ := l.caps(); return float64(total) }),
	}
}

// Accept returns the next connection admitted.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addressKey(c.RemoteAddr())
		reason, ok := l.admit(key)
		if ok {
			return &limitedConn{Conn: c, limit: l, key: key}, nil
		}
		l.refused[reason].Inc() // before the reset: whoever saw it finds it counted
		refuse(c)
		if l.budget.allow() {
			total, perAddress := l.caps()
			l.logger.Warn("connection refused", "reason", refusedReasons[reason], "client", keyString(key),
				"connections", total, "connections_per_address", perAddress)
		}
	}
}

// admit counts a connection from key in, unless a cap is reached.
func (l *connLimit) admit(key netip.Addr) (reason int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byAddr[key] >= l.perAddress:
		return refusedAddress, false
	case l.open >= l.maxOpen:
		return refusedTotal, false
	}
	l.open++
	l.byAddr[key]++
	return 0, true
}

// release counts a connection from key out.
func (l *connLimit) release(key netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.byAddr[key] - 1; n > 0 {
		l.byAddr[key] = n
	} else {
		delete(l.byAddr, key)
	}
}

// caps are the caps in force.
func (l *connLimit) caps() (total, perAddress int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxOpen, l.perAddress
}

// setCaps replaces the caps (a configuration reload). Connections open
// stay open; a lowered cap refuses new ones until fewer are open.
func (l *connLimit) setCaps(total, perAddress int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxOpen, l.perAddress = total, perAddress
}

// openNow is the number of admitted connections not yet closed.
func (l *connLimit) openNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// refuse closes a connection with a reset: the client's next read fails
// with "connection reset by peer", the broker keeps no TIME_WAIT state for
// it, and nothing it may have sent is read.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// addressKey is the per-address key of a client address: the IPv4 address
// (an IPv4-mapped IPv6 address is IPv4), or the /64 prefix of an IPv6 one.
// An address that is not TCP has the zero key, shared by all of them.
func addressKey(a net.Addr) netip.Addr {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := tcp.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// keyString writes a per-address key as an address or an IPv6 /64.
func keyString(key netip.Addr) string {
	if key.Is6() {
		return netip.PrefixFrom(key, 64).String()
	}
	return key.String()
}

// limitedConn is an admitted connection; its first Close releases its
// place.
type limitedConn struct {
	net.Conn
	limit  *connLimit
	key    netip.Addr
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.limit.release(c.key)
	}
	return c.Conn.Close()
}

// CloseWrite keeps net/http's half-close (it sends a FIN after an error
// answer so that the client reads it before any reset).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// descriptorReserve is what the connection cap leaves of the file
// descriptor limit to everything else: the fleet store (a bbolt file, or
// PostgreSQL's pool, 8 connections by default), the data directory's lock,
// the listener, the poller, standard streams, DNS, and the connection being
// refused at the cap, which holds one for an instant. At most half the
// limit is kept back.
const descriptorReserve = 256

// connectionCaps are the caps in force: limits.connections, lowered to
// what a file descriptor limit of nofile (0: unknown) leaves after the
// reserve, and limits.connections_per_address, lowered in the same
// proportion (so one address still gets its configured share).
func connectionCaps(l Limits, nofile uint64) (total, perAddress int) {
	total, perAddress = l.Connections, l.ConnectionsPerAddress
	if nofile == 0 {
		return total, perAddress
	}
	if ceiling := nofile - min(descriptorReserve, nofile/2); uint64(total) > ceiling {
		total = int(ceiling)
		perAddress = max(1, int(int64(perAddress)*int64(total)/int64(l.Connections)))
	}
	return total, perAddress
}

// limitConnections wraps the broker's listener in the connection caps, and
// says so when the descriptor limit lowers limits.connections.
func (m *Main) limitConnections(ln net.Listener, l Limits, suppressed *prometheus.CounterVec) *connLimit {
	total, perAddress := m.connectionCaps(l)
	return newConnLimit(ln, total, perAddress, m.Logger, suppressed)
}

// connectionCaps are l's connection caps under the file descriptor limit,
// with a warning when that limit lowers them.
func (m *Main) connectionCaps(l Limits) (total, perAddress int) {
	nofile := openFileLimit()
	total, perAddress = connectionCaps(l, nofile)
	if total < l.Connections {
		m.Logger.Warn("limits.connections lowered to what the file descriptor limit allows",
			"configured", l.Connections, "connections", total, "open_file_limit", nofile, "reserve", min(descriptorReserve, nofile/2))
	}
	return total, perAddress
}
