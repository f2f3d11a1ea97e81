package app

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// limitedListener is a connLimit on a loopback port whose admitted
// connections arrive on accepted; its log lines go to logs.
type limitedListener struct {
	*connLimit
	accepted chan net.Conn
	logs     *bytes.Buffer
}

func mustListenLimited(t *testing.T, total, perAddress int) *limitedListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewJSONHandler(&syncWriter{w: logs}, nil))
	l := &limitedListener{connLimit: newConnLimit(ln, total, perAddress, logger, newSuppressedLines()),
		accepted: make(chan net.Conn, 16), logs: logs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			l.accepted <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for len(l.accepted) > 0 {
			_ = (<-l.accepted).Close()
		}
	})
	return l
}

// dial connects from the loopback address from and says whether the
// listener admitted the connection (false: it was reset at once).
func (l *limitedListener) dial(t *testing.T, from string) (client net.Conn, admitted net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if errors.Is(err, syscall.ECONNRESET) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	read := make(chan error, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case a := <-l.accepted:
		return c, a
	case err := <-read:
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("from %s: neither admitted nor reset: %v", from, err)
		}
		return c, nil
	}
}

func TestConnLimit(t *testing.T) {
	l := mustListenLimited(t, 3, 2)
	want := func(what string, open int, address, total float64) {
		t.Helper()
		if got := l.openNow(); got != open {
			t.Errorf("%s: %d open, want %d", what, got, open)
		}
		if got := value(t, l.refused[refusedAddress]); got != address {
			t.Errorf(`%s: refused{reason="address"} = %v, want %v`, what, got, address)
		}
		if got := value(t, l.refused[refusedTotal]); got != total {
			t.Errorf(`%s: refused{reason="total"} = %v, want %v`, what, got, total)
		}
	}
	var admitted []net.Conn
	for range 2 {
		if _, a := l.dial(t, "127.0.0.1"); a == nil {
			t.Fatal("127.0.0.1 refused below its cap")
		} else {
			admitted = append(admitted, a)
		}
	}
	if _, a := l.dial(t, "127.0.0.1"); a != nil {
		t.Fatal("127.0.0.1 admitted past its cap of 2")
	}
	want("address cap", 2, 1, 0)
	if _, a := l.dial(t, "127.0.0.2"); a == nil {
		t.Fatal("127.0.0.2 refused below the caps")
	}
	if _, a := l.dial(t, "127.0.0.3"); a != nil {
		t.Fatal("127.0.0.3 admitted past the total cap of 3")
	}
	want("total cap", 3, 1, 1)

	// Closing twice frees one place.
	for range 2 {
		if err := admitted[0].Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatal(err)
		}
	}
	want("closed twice", 2, 1, 1)
	if _, a := l.dial(t, "127.0.0.1"); a == nil {
		t.Fatal("127.0.0.1 refused after one of its connections closed")
	}
	want("after close", 3, 1, 1)

	// The instruments, as registered.
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			name := f.GetName()
			for _, lp := range m.Label {
				name += "," + lp.GetValue()
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for name, v := range map[string]float64{"muster_connections_open": 3, "muster_connections_limit": 3,
		"muster_connections_refused_total,address": 1, "muster_connections_refused_total,total": 1} {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], v, got)
		}
	}
	if lines := logLines(t, l.logs); len(lines) != 2 || lines[0]["reason"] != "address" || lines[0]["client"] != "127.0.0.1" ||
		lines[1]["reason"] != "total" || lines[1]["client"] != "127.0.0.3" {
		t.Errorf("log: %v", lines)
	}
}

func TestAddressKey(t *testing.T) {
	for _, tt := range []struct {
		name string
		addr net.Addr
		want string
	}{
		{"IPv4", &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 80}, "192.0.2.7"},
		{"IPv4Mapped", net.TCPAddrFromAddrPort(netip.MustParseAddrPort("[::ffff:192.0.2.7]:80")), "192.0.2.7"},
		{"IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 80}, "2001:db8:1:2::/64"},
		{"IPv6SameSlash64", &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::1"), Port: 81}, "2001:db8:1:2::/64"},
		{"IPv6Loopback", &net.TCPAddr{IP: net.IPv6loopback, Port: 80}, "::/64"},
		{"NotTCP", &net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "invalid IP"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := keyString(addressKey(tt.addr)); got != tt.want {
				t.Errorf("addressKey(%v) = %s, want %s", tt.addr, got, tt.want)
			}
		})
	}
}

func TestConnectionCapsFromDescriptors(t *testing.T) {
	defaults := Limits{Connections: 10_000, ConnectionsPerAddress: 2_500}
	for _, tt := range []struct {
		name                 string
		limits               Limits
		nofile               uint64
		wantTotal, wantPerIP int
	}{
		{"UnknownLimit", defaults, 0, 10_000, 2_500},
		{"Room", defaults, 20_000, 10_000, 2_500},
		{"JustRoom", defaults, 10_256, 10_000, 2_500},
		{"Lowered", defaults, 10_255, 9_999, 2_499},
		{"Small", defaults, 1_024, 768, 192},
		{"Tiny", defaults, 64, 32, 8},
		{"OneAddressMayHoldAll", Limits{Connections: 50_000, ConnectionsPerAddress: 50_000}, 20_000, 19_744, 19_744},
		{"AtLeastOnePerAddress", Limits{Connections: 10_000, ConnectionsPerAddress: 1}, 1_024, 768, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			total, perIP := connectionCaps(tt.limits, tt.nofile)
			if total != tt.wantTotal || perIP != tt.wantPerIP {
				t.Errorf("connectionCaps(%+v, %d) = %d, %d; want %d, %d", tt.limits, tt.nofile, total, perIP, tt.wantTotal, tt.wantPerIP)
			}
		})
	}
}
