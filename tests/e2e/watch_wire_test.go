package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	r3sse "github.com/r3labs/sse/v2"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/sse"
)

// The stream is standard SSE: an independent client reads it.
func TestWatchThirdPartyClient(t *testing.T) {
	b := MustStartBroker(t)
	s := createSession(t, b, "", "w", 600000)
	c := r3sse.NewClient(b.URL() + "/v1/leases/watch?" + url.Values{"selector": {"lease://acme/**"}}.Encode())
	c.ReconnectStrategy = nil
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *r3sse.Event, 16)
	go c.SubscribeRawWithContext(ctx, func(ev *r3sse.Event) {
		cp := *ev
		got <- &cp
	})
	first := <-got
	for len(first.Event) == 0 && len(first.Data) == 0 { // the retry: field alone
		first = <-got
	}
	if string(first.Event) != "snapshot" {
		t.Fatalf("first event %q", first.Event)
	}
	b.mustAcquire(t, s, "lease://acme/r/x")
	select {
	case ev := <-got:
		if string(ev.Event) != "change" || !strings.Contains(string(ev.Data), `"kind":"acquired"`) {
			t.Fatalf("change read by r3labs: %q %s", ev.Event, ev.Data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third-party client got no change")
	}
}

// HTTP/2 without TLS (h2c) carries the stream too.
func TestWatchOverHTTP2(t *testing.T) {
	b := MustStartBroker(t)
	tr := &http.Transport{}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	ws := b.openWatch(t, watchOpts{client: &http.Client{Transport: tr}}, "lease://acme/**")
	if ws.resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", ws.resp.Proto)
	}
	ws.marker(t)
	s := createSession(t, b, "", "w", 600000)
	b.mustAcquire(t, s, "lease://acme/r/x")
	if c := ws.change(t); c.Kind != "acquired" {
		t.Fatalf("change over h2c: %+v", c)
	}
}

// A reader that stops reading overflows its own stream and nothing else:
// other clients' acquire latency stays within 2× of the same load without
// the stalled reader.
func TestWatchStalledReader(t *testing.T) {
	b := MustStartWallClockBroker(t)
	probe := createSession(t, b, "", "probe", 600000)
	bulk := func() {
		b.Broker().Exec(context.Background(), func(s *core.State, now time.Time) error {
			var id core.SessionID
			id[0] = 0xbb
			if _, err := s.Session(now, "default", id); err != nil {
				s.CreateSession(now, core.SessionRequest{Family: "default", ID: id, OwnerID: "bulk", TTL: core.MaxSessionTTL})
			}
			for i := 0; i < 100; i++ {
				r := core.Route{Realm: "bulk", Area: "a", Resource: fmt.Sprint(i)}
				h, _, err := s.Acquire(now, core.AcquireRequest{Family: "default", Session: id, Route: r, TTL: time.Minute})
				if err != nil {
					return err
				}
				s.Release(now, core.ReleaseRequest{Family: "default", Session: id, Route: r, Token: h.Token})
			}
			return nil
		})
	}
	measure := func() time.Duration {
		var lat []time.Duration
		for i := 0; i < 200; i++ {
			bulk() // 200 changes for the streams
			t0 := time.Now()
			l := b.mustAcquire(t, probe, "lease://probe/r/x")
			lat = append(lat, time.Since(t0))
			b.release(t, probe, "lease://probe/r/x", l.FencingToken)
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	// A healthy reader in both phases, so fan-out work is the same.
	healthy := b.openWatch(t, watchOpts{}, "lease://bulk/**")
	go func() {
		for range healthy.events {
		}
	}()
	baseline := measure()

	conn, err := net.Dial("tcp", strings.TrimPrefix(b.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/leases/watch?selector=lease://bulk/** HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
	// Never read from conn.
	during := measure()
	waitFor(t, func() bool { return b.metric(t, "muster_watch_overflows_total") >= 1 })
	t.Logf("median acquire: %v without, %v with a stalled reader", baseline, during)
	floor := max(baseline, 500*time.Microsecond) // sub-millisecond medians are scheduler noise on 2 shared cores
	if during > 2*floor {
		t.Fatalf("a stalled reader slowed other clients: %v vs baseline %v", during, baseline)
	}
	// The stalled stream is finished: once read, it ends with everything
	// queued and then `event: overflow` — unless the reader stalled past the
	// per-write deadline, in which case the broker cut the connection.
	// Either way it is not left hanging.
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := sse.NewDecoder(resp.Body)
	for {
		ev, err := d.Next()
		if err == nil && ev.Name == "overflow" {
			break
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the stalled stream neither ended with overflow nor was cut off")
			}
			t.Logf("the broker cut the stalled connection (write deadline): %v", err)
			break
		}
	}
	// The stalled stream and its registration are gone (the healthy one may
	// remain).
	waitFor(t, func() bool {
		return b.metric(t, "muster_watch_streams") <= 1 && b.metric(t, "muster_watch_registrations_wildcard") <= 1
	})
}

// SIGTERM sends `event: shutdown` to every stream before the process exits.
func TestBinaryShutdownEndsStreams(t *testing.T) {
	p := startProcess(t, "--addr", "127.0.0.1:0")
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/v1/leases/watch?selector=lease://**", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: snapshot") {
			break
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	saw := false
	for {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "event: shutdown") {
			saw = true
		}
		if err != nil {
			break
		}
	}
	if !saw {
		t.Fatal("no event: shutdown before the stream closed")
	}
	for range p.lines {
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
