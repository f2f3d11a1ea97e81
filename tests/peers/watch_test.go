package peers

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/sse"
	"github.com/musterhq/muster/tests/load"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// watchers is the number of watchers of the watch benchmark (env
// MUSTER_PEERS_WATCHERS, default 1,000).
func watchers() int {
	if n, err := strconv.Atoi(os.Getenv("MUSTER_PEERS_WATCHERS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// A fanout is a set of watchers of one system and the change they watch:
// change makes one change (and undoes it, which the watchers also see);
// got has, per watcher, the time each change reached it.
type fanout struct {
	change func() error
	got    []chan time.Time
	close  func()
	pid    int // the server's process, whose CPU time is reported
}

// BenchmarkWatch1000 makes one change reach 1,000 watchers, op after op:
// Muster SSE streams on a selector (one connection each) against etcd
// watches on a prefix: one client, so one connection, each; all on 50
// clients (20 watches multiplexed on each connection); and, as etcd clients
// usually do, all on one client. Each op is one change (taken and given
// back); it reports the p50/p99 of the latency of every delivery, from just
// before the change's request to the watcher's read of it. The watchers of
// a system are opened once, when its first row runs (a -bench pattern that
// leaves a system out never opens it), and serve all its rounds; the rounds
// are interleaved, so the systems of one round share its background load.
func BenchmarkWatch1000(b *testing.B) {
	n := watchers()
	systems := []watchSystem{
		{"muster-sse", openMusterWatch},
		{"muster-sse-h2-50conn", func(tb testing.TB, n int) *fanout { return openMusterH2Watch(tb, n, min(n, 50)) }},
		{"etcd-watch", func(tb testing.TB, n int) *fanout { return openEtcdWatch(tb, n, n, "watch") }},
		{"etcd-watch-50conn", func(tb testing.TB, n int) *fanout { return openEtcdWatch(tb, n, min(n, 50), "watch-50") }},
		{"etcd-watch-1conn", func(tb testing.TB, n int) *fanout { return openEtcdWatch(tb, n, 1, "watch-1") }},
	}
	if os.Getenv(baseEnv) != "" {
		base := watchSystem{"muster-base-sse", func(tb testing.TB, n int) *fanout {
			return openMusterWatchAt(tb, n, baseURL(tb), "muster-base")
		}}
		systems = slices.Insert(systems, 1, base)
	}
	opened := make([]*fanout, len(systems))
	defer func() {
		for _, f := range opened {
			if f != nil {
				f.close()
			}
		}
	}()
	for r := 1; r <= rounds(); r++ {
		for i, sys := range systems {
			b.Run(fmt.Sprintf("round%d/%s", r, sys.name), func(b *testing.B) {
				if opened[i] == nil {
					opened[i] = sys.open(b, n)
				}
				deliver(b, opened[i])
			})
		}
	}
}

// A watchSystem is a row of the watch benchmark: open starts n watchers.
type watchSystem struct {
	name string
	open func(testing.TB, int) *fanout
}

func deliver(b *testing.B, f *fanout) {
	for _, got := range f.got {
		for len(got) > 0 {
			<-got // a late delivery of an earlier op
		}
	}
	lat := make([]time.Duration, 0, b.N*len(f.got))
	cpu := cpuTime(f.pid)
	for b.Loop() {
		start := time.Now()
		if err := f.change(); err != nil {
			b.Fatal(err)
		}
		for _, got := range f.got {
			select {
			case at := <-got:
				lat = append(lat, at.Sub(start))
			case <-time.After(30 * time.Second):
				b.Fatal("a watcher saw no change for 30 s")
			}
		}
	}
	cpu = cpuTime(f.pid) - cpu
	slices.Sort(lat)
	if f.pid != 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
	b.ReportMetric(float64(len(f.got)), "watchers")
	b.ReportMetric(float64(load.Percentile(lat, 0.50).Microseconds()), "delivery-p50-µs")
	b.ReportMetric(float64(load.Percentile(lat, 0.99).Microseconds()), "delivery-p99-µs")
}

// openMusterWatch opens n SSE streams on lease://peers/watch/** of the real
// broker, each on its own raw connection, and the pair workload's Muster
// leaser, which changes lease://peers/watch/x.
func openMusterWatch(tb testing.TB, n int) *fanout {
	return openMusterWatchAt(tb, n, musterURL(tb), "muster")
}

// openMusterWatchAt is openMusterWatch on the broker at base, started as
// name.
func openMusterWatchAt(tb testing.TB, n int, base, name string) *fanout {
	const area = "watch"
	tb.Helper()
	addr := strings.TrimPrefix(base, "http://")
	f := &fanout{pid: pidOf(name)}
	var conns []net.Conn
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, conn)
		fmt.Fprintf(conn, "GET /v1/leases/watch?selector=lease://peers/%s/** HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer load-token\r\n\r\n", area)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("open stream: %v %v", err, resp)
		}
		f.got = append(f.got, readChanges(tb, sse.NewDecoder(resp.Body)))
	}
	closeHTTP := musterChanges(tb, f, base, area)
	f.close = func() {
		for _, c := range conns {
			c.Close()
		}
		closeHTTP()
	}
	return f
}

// musterChanges sets f.change to the pair workload's Muster leaser taking
// and giving back lease://peers/<area>/x, and returns what closes it. Each
// Muster row watches an area of its own, so that rows on one broker do not
// see each other's changes.
func musterChanges(tb testing.TB, f *fanout, base, area string) (close func()) {
	h := openHTTP(tb, base)
	f.change = func() error {
		token, err := h.acquire(0, area+"/x")
		if err != nil {
			return err
		}
		return h.release(0, area+"/x", token)
	}
	return h.close
}

// openEtcdWatch opens n watches on the prefix peers/<area>/ of the real etcd
// over conns clients (one connection each), and the pair workload's etcd
// leaser, which changes peers/<area>/x. Each row watches an area of its
// own, so that rows do not see each other's changes.
func openEtcdWatch(tb testing.TB, n, conns int, area string) *fanout {
	tb.Helper()
	ep := etcdEndpoint(tb)
	ctx, cancel := context.WithCancel(context.Background())
	var cs []*clientv3.Client
	for range conns {
		c, err := newEtcdClient(ep)
		if err != nil {
			tb.Fatal(err)
		}
		cs = append(cs, c)
	}
	f := &fanout{pid: pidOf("etcd")}
	for i := range n {
		wch := cs[i%conns].Watch(ctx, "peers/"+area+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		if first := <-wch; !first.Created {
			tb.Fatalf("etcd watch not created: %v", first.Err())
		}
		got := make(chan time.Time, 16)
		f.got = append(f.got, got)
		go func() {
			for resp := range wch {
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut {
						got <- time.Now()
					}
				}
			}
		}()
	}
	e := openEtcd(tb)
	f.change = func() error {
		token, err := e.acquire(0, area+"/x")
		if err != nil {
			return err
		}
		return e.release(0, area+"/x", token)
	}
	f.close = func() {
		cancel()
		for _, c := range cs {
			c.Close()
		}
		e.close()
	}
	return f
}
