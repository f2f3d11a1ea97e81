package fleetstore

import (
	"context"
	"fmt"
	"github.com/musterhq/muster"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Sweeps on PostgreSQL over connections cut at chosen points (issue 16: a
// sweep whose schema every spec satisfies once dropped specs in a fault
// campaign round that cut the broker's connections). The store talks to the
// real server through cutProxy, which can sever a connection after a given
// number of bytes of the server's answer: in the middle of a row, between
// rows, inside the sweep's delete transaction.

// cutProxy forwards TCP connections to a PostgreSQL server. Once armed with
// n, the next bytes the server sends are forwarded up to n of them, then
// the connection carrying them is closed both ways.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Int64 // bytes left before the cut; -1 when not armed
	cuts   atomic.Int64
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.armed.Store(-1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cutAll() })
	return p
}

// proxied returns the URL u with its host replaced by the proxy's.
func (p *cutProxy) proxied(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.ln.Addr().String()
	return pu.String()
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); s.Close(); c.Close() }()
		go p.down(s, c)
	}
}

// down copies the server's bytes to the client, cutting when armed.
func (p *cutProxy) down(s, c net.Conn) {
	defer func() { s.Close(); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if left := p.armed.Load(); left >= 0 {
				if int64(n) > left && p.armed.CompareAndSwap(left, -1) {
					_, _ = c.Write(buf[:left])
					p.cuts.Add(1)
					return
				}
				p.armed.CompareAndSwap(left, left-int64(n))
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// arm cuts the connection that carries the n+1st byte from now.
func (p *cutProxy) arm(n int64) { p.armed.Store(n) }

func (p *cutProxy) disarm() { p.armed.Store(-1) }

// cutAll closes every connection through the proxy, as pg_terminate_backend
// does from the other side.
func (p *cutProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// cutFixture is a store reached through a cutProxy, and a direct one to check
// what is really stored.
type cutFixture struct {
	proxy       *cutProxy
	cut, direct *Fleet
	cutStore    Store
}

func newCutFixture(t *testing.T) *cutFixture {
	t.Helper()
	u := MustPostgresSchema(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, pu.Host)
	// One connection, so that a cut always hits the one the sweep uses.
	cs := MustOpenPostgresURL(t, p.proxied(t, u)+"&pool_max_conns=1")
	return &cutFixture{proxy: p, cut: New(cs), cutStore: cs, direct: New(MustOpenPostgresURL(t, u))}
}

// padded is a spec that passes topicSchema, n bytes long or a little more,
// so that one page of them spans many TCP reads.
func padded(i, n int) string {
	return fmt.Sprintf(`{"topic":"t%d","pad":"%s"}`, i, strings.Repeat("x", n))
}

// TestPostgresSweepCutMidRead cuts the connection at many points of the
// sweep's read of a page (before the first row, inside a row, between rows):
// the sweep fails as unavailable and drops nothing, whatever the point.
func TestPostgresSweepCutMidRead(t *testing.T) {
	fx := newCutFixture(t)
	const rows, size = 60, 3000
	var all []string
	for i := range rows {
		all = append(all, mustRegister(t, fx.direct, fam, root, "s", padded(i, size)))
	}
	slices.Sort(all)
	offsets := []int64{0, 1, 5, 40, 100, 1000, 3000, 3001, 3050, 50_000, 100_003, 170_000}
	for range 8 {
		offsets = append(offsets, rand.Int64N(rows*size))
	}
	for _, off := range offsets {
		time.Sleep(5 * time.Millisecond) // the pool's connection is idle: no ping (pingAfter 1 s)
		fx.proxy.arm(off)
		res, err := fx.cut.Sweep(ctx, fam, root, []byte(topicSchema))
		fx.proxy.disarm()
		if err == nil {
			t.Fatalf("cut after %d bytes: the sweep succeeded (%d kept, dropped %v); the page is %d bytes", off, len(res.Kept), res.Dropped, rows*size)
		}
		wantCode(t, err, muster.CodeUnavailable)
		if got := names(listAll(t, fx.direct, fam, root, 0)); !slices.Equal(got, all) {
			t.Fatalf("cut after %d bytes: %d of %d specs left", off, len(got), rows)
		}
	}
	if n := fx.proxy.cuts.Load(); n != int64(len(offsets)) {
		t.Errorf("%d cuts for %d sweeps", n, len(offsets))
	}
	// And the store recovers: an uncut sweep keeps everything.
	res, err := fx.cut.Sweep(ctx, fam, root, []byte(topicSchema))
	must(t, err)
	if len(res.Kept) != rows || len(res.Dropped) != 0 {
		t.Fatalf("after the cuts: kept %d, dropped %v", len(res.Kept), res.Dropped)
	}
}

// armedDrop arms the proxy just before the sweep's compare-and-delete, and
// disarms it after, noting how many bytes were left before the cut.
type armedDrop struct {
	Store
	p    *cutProxy
	off  int64
	left int64
}

func (s *armedDrop) Drop(ctx context.Context, family, root string, judged []Row) ([]string, error) {
	s.p.arm(s.off)
	defer func() { s.left = s.p.armed.Load(); s.p.disarm() }()
	return s.Store.Drop(ctx, family, root, judged)
}

// freshConn leaves the pool (of one connection) holding one live connection
// on which nothing but Get was ever prepared, so that what a sweep then asks
// of the server, and the bytes of its answers, are the same every time.
func (fx *cutFixture) freshConn(t *testing.T) {
	t.Helper()
	fx.proxy.cutAll()
	_, _ = fx.cutStore.Get(ctx, fam, root, "x-1") // fails on the cut connection, or dials
	if _, err := fx.cutStore.Get(ctx, fam, root, "x-1"); muster.ErrorCode(err) != muster.CodeSpecNotFound {
		t.Fatalf("no fresh connection: %v", err)
	}
}

// TestPostgresSweepCutMidDrop cuts the connection inside the delete
// transaction of a sweep that drops every spec (schema false): at each of
// the first and last 24 bytes of the server's answers (the answers to BEGIN
// and to COMMIT) and at 24 points between. A
// page goes whole or not at all; a sweep that reports success dropped, and
// lists, every spec; one that fails is unavailable. Cut in the answer to
// BEGIN, the transaction is begun again on a new connection (nothing ran);
// cut in the answer to COMMIT, the specs are gone and the sweep must fail,
// not run the transaction again and report nothing dropped.
func TestPostgresSweepCutMidDrop(t *testing.T) {
	fx := newCutFixture(t)
	const rows = 3
	var armed *armedDrop
	sweep := func(i int, off int64) (res SweepResult, left int, err error) {
		r := fmt.Sprintf("drop/r%d", i)
		for i := range rows {
			mustRegister(t, fx.direct, fam, r, "s", padded(i, 10))
		}
		fx.freshConn(t)
		armed = &armedDrop{Store: fx.cutStore, p: fx.proxy, off: off}
		res, err = New(armed).Sweep(ctx, fam, r, []byte(`false`))
		return res, len(listAll(t, fx.direct, fam, r, 0)), err
	}
	// A dry run measures the answers' bytes: the last 18 are COMMIT's
	// CommandComplete (12) and ReadyForQuery (6).
	const big = 1 << 40
	if _, left, err := sweep(0, big); err != nil || left != 0 {
		t.Fatalf("uncut sweep: %v, %d left", err, left)
	}
	total := big - armed.left
	if total < 100 {
		t.Fatalf("the drop transaction's answers took %d bytes", total)
	}
	var offsets []int64
	for off := range int64(24) {
		offsets = append(offsets, off, total-24+off)
	}
	for i := range int64(24) {
		offsets = append(offsets, 24+i*(total-48)/24)
	}
	seen := map[string]int{}
	for _, off := range offsets {
		res, left, err := sweep(int(off)+1, off)
		outcome := ""
		switch {
		case err == nil && len(res.Dropped) == rows && left == 0:
			outcome = "success"
		case err != nil && left == rows:
			outcome = "nothing deleted"
		case err != nil && left == 0:
			outcome = "committed, answer cut"
		default:
			t.Fatalf("cut after %d of %d bytes: err %v, dropped %d, %d of %d left", off, total, err, len(res.Dropped), left, rows)
		}
		if err != nil {
			wantCode(t, err, muster.CodeUnavailable)
		}
		if off >= total-18 && outcome != "committed, answer cut" {
			t.Errorf("cut after %d of %d bytes, in the answer to COMMIT: %s", off, total, outcome)
		}
		seen[outcome]++
	}
	t.Logf("%d cut points in %d bytes of answers: %v", len(offsets), total, seen)
	if seen["nothing deleted"] == 0 || seen["committed, answer cut"] == 0 {
		t.Errorf("want cuts both before and after the commit: %v", seen)
	}
}

// TestPostgresSweepUnderCuts is the campaign's pg-cut round in miniature:
// registers, some cancelled after a millisecond or two, and sweeps with a
// schema every spec satisfies, while every connection is cut every few tens
// of milliseconds. No sweep may drop anything, and every acknowledged spec
// stays.
func TestPostgresSweepUnderCuts(t *testing.T) {
	fx := newCutFixture(t)
	wctx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	var mu sync.Mutex
	acked := map[string]bool{}
	var sweeps, failed, regs atomic.Int64
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				c, cancel := wctx, context.CancelFunc(func() {})
				if i%2 == 1 {
					c, cancel = context.WithTimeout(wctx, time.Duration(1+rand.IntN(3))*time.Millisecond)
				}
				name, err := fx.cut.Register(c, fam, root, "r", []byte(fmt.Sprintf(`{"topic":"w%d-%d"}`, w, i)))
				cancel()
				if err == nil {
					regs.Add(1)
					mu.Lock()
					acked[name] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for wctx.Err() == nil {
			res, err := fx.cut.Sweep(wctx, fam, root, []byte(topicSchema))
			if err != nil {
				failed.Add(1)
				if c := muster.ErrorCode(err); c != muster.CodeUnavailable {
					t.Errorf("sweep failed with %s: %v", c, err)
				}
				continue
			}
			sweeps.Add(1)
			if len(res.Dropped) != 0 {
				t.Errorf("a sweep every spec satisfies dropped %v", res.Dropped)
			}
		}
	})
	wg.Go(func() {
		for wctx.Err() == nil {
			time.Sleep(time.Duration(10+rand.IntN(40)) * time.Millisecond)
			fx.proxy.cutAll()
		}
	})
	wg.Wait()
	stored := map[string]bool{}
	for _, r := range listAll(t, fx.direct, fam, root, 0) {
		stored[r.Name] = true
	}
	for n := range acked {
		if !stored[n] {
			t.Errorf("acknowledged %s is gone", n)
		}
	}
	t.Logf("%d registers acknowledged, %d stored, %d sweeps succeeded, %d failed on a cut", regs.Load(), len(stored), sweeps.Load(), failed.Load())
	if sweeps.Load() == 0 || failed.Load() == 0 {
		t.Errorf("want sweeps both completed and cut: %d / %d", sweeps.Load(), failed.Load())
	}
}

// TestPostgresRegisterCutStoredOnce cuts the connection in the answers to a
// register on a fresh connection (the statement's preparation, then its
// execution): a register is stored at most once, and one that reports
// success is stored. The store's one retry must not run an INSERT that
// reached the server again (pgx calls some errors after a send safe to
// retry: see connPool.inTx).
func TestPostgresRegisterCutStoredOnce(t *testing.T) {
	fx := newCutFixture(t)
	register := func(r string, off int64) (left int64, err error) {
		fx.freshConn(t)
		fx.proxy.arm(off)
		_, err = fx.cut.Register(ctx, fam, r, "s", []byte(`{"topic":"x"}`))
		left = fx.proxy.armed.Load()
		fx.proxy.disarm()
		return left, err
	}
	const big = 1 << 40
	left, err := register("reg/dry", big)
	must(t, err)
	total := big - left
	var offsets []int64
	for off := range int64(24) {
		offsets = append(offsets, total-24+off)
	}
	for i := range int64(8) {
		offsets = append(offsets, i*(total-24)/8)
	}
	seen := map[string]int{}
	for _, off := range offsets {
		r := fmt.Sprintf("reg/o%d", off)
		_, err := register(r, off)
		n := len(listAll(t, fx.direct, fam, r, 0))
		if n > 1 || (err == nil && n != 1) {
			t.Fatalf("cut after %d of %d bytes: err %v, %d stored", off, total, err, n)
		}
		if err != nil {
			wantCode(t, err, muster.CodeUnavailable)
		}
		seen[fmt.Sprintf("err %v, stored %d", err != nil, n)]++
	}
	t.Logf("%d cut points in %d bytes of answers: %v", len(offsets), total, seen)
	if seen["err true, stored 1"] == 0 {
		t.Errorf("no cut landed after the commit: %v", seen)
	}
}
