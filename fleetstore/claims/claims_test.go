package claims_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/fleetstore/claims"
	"github.com/musterhq/muster/tests/cutproxy"
	"github.com/musterhq/muster/tests/pgtest"
)

// mustOpen opens a claim store for broker id on url, closed when the test ends.
func mustOpen(tb testing.TB, u, id string, ttl, margin time.Duration) *claims.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := claims.Open(ctx, u, claims.Config{Broker: id, Addr: "http://" + id + ":7420", TTL: ttl, Margin: margin})
	if err != nil {
		tb.Fatalf("open %s: %v", id, err)
	}
	tb.Cleanup(s.Close)
	return s
}

func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}

func TestAcquireRenewRelease(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	a := mustOpen(t, u, "a", 5*time.Second, time.Second)
	b := mustOpen(t, u, "b", 5*time.Second, time.Second)

	ca, err := a.Acquire(ctx(t), "acme")
	if err != nil || ca.Epoch != 1 {
		t.Fatalf("a acquire: %+v %v, want epoch 1", ca, err)
	}
	if _, err := b.Acquire(ctx(t), "acme"); !errors.Is(err, claims.ErrHeld) {
		t.Fatalf("b acquire of a held family: %v, want ErrHeld", err)
	}
	if _, err := a.Acquire(ctx(t), "acme"); !errors.Is(err, claims.ErrHeld) {
		t.Fatalf("a acquire of its own live claim: %v, want ErrHeld (one claim per family)", err)
	}
	ca2, err := a.Renew(ctx(t), ca)
	if err != nil || ca2.Epoch != 1 || !ca2.Sent.After(ca.Sent) {
		t.Fatalf("renew: %+v %v", ca2, err)
	}
	if !ca2.Deadline().After(ca.Deadline()) {
		t.Fatalf("renewal did not move the deadline: %v then %v", ca.Deadline(), ca2.Deadline())
	}
	owners, err := b.Owners(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if o := owners["acme"]; o.Broker != "a" || o.Addr != "http://a:7420" || o.Epoch != 1 || !o.Live {
		t.Fatalf("owners: %+v", o)
	}
	if o := owners["acme"]; !o.Until.After(time.Now()) || o.Until.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("owners: until %v is not within the TTL from now", o.Until)
	}
	if _, err := b.Renew(ctx(t), ca2); !errors.Is(err, claims.ErrLost) {
		t.Fatalf("b renewing a's claim: %v, want ErrLost", err)
	}

	if err := a.Release(ctx(t), ca2); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Renew(ctx(t), ca2); !errors.Is(err, claims.ErrLost) {
		t.Fatalf("renew after release: %v, want ErrLost", err)
	}
	cb, err := b.Acquire(ctx(t), "acme")
	if err != nil || cb.Epoch != 2 {
		t.Fatalf("b acquire after release (no wait): %+v %v, want epoch 2", cb, err)
	}
	if err := a.Release(ctx(t), ca2); err != nil {
		t.Fatalf("a releasing a claim it lost: %v (want no error)", err)
	}
	if o, _ := a.Owners(ctx(t)); o["acme"].Broker != "b" || !o["acme"].Live {
		t.Fatalf("a's stale release touched b's claim: %+v", o["acme"])
	}
}

func TestExpiryWaitsForTheMargin(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	const ttl, margin = time.Second, 600 * time.Millisecond
	a := mustOpen(t, u, "a", ttl, margin)
	b := mustOpen(t, u, "b", ttl, margin)
	ca, err := a.Acquire(ctx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	// Just past the deadline a has to stop at, the server still counts the
	// claim live. A read that took longer than the slack between the
	// deadline and the expiry (70 ms here) was evaluated after the expiry
	// and proves nothing either way (a loaded machine).
	time.Sleep(time.Until(ca.Deadline()))
	sent := time.Now()
	o, err := b.Owners(ctx(t))
	switch took, slack := time.Since(sent), ca.Sent.Add(ttl).Sub(ca.Deadline()); {
	case err != nil:
		t.Fatal(err)
	case !o["acme"].Live && took < slack:
		t.Fatalf("at a's deadline the claim is not live by the server's clock: %+v (read in %v)", o["acme"], took)
	case !o["acme"].Live:
		t.Logf("the read at the deadline took %v, more than the %v slack: inconclusive", took, slack)
	}
	// Expired but within the margin: nobody may take it.
	time.Sleep(time.Until(ca.Sent.Add(ttl + 100*time.Millisecond)))
	if _, err := b.Acquire(ctx(t), "acme"); !errors.Is(err, claims.ErrHeld) {
		t.Fatalf("acquire within the margin: %v, want ErrHeld", err)
	}
	if _, err := a.Renew(ctx(t), ca); !errors.Is(err, claims.ErrLost) {
		t.Fatalf("renewing an expired claim: %v, want ErrLost", err)
	}
	time.Sleep(time.Until(ca.Sent.Add(ttl + margin + 100*time.Millisecond)))
	cb, err := b.Acquire(ctx(t), "acme")
	if err != nil || cb.Epoch != 2 {
		t.Fatalf("acquire after expiry+margin: %+v %v, want epoch 2", cb, err)
	}
}

func TestOneWinnerAmongRacers(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	stores := []*claims.Store{
		mustOpen(t, u, "a", 5*time.Second, time.Second),
		mustOpen(t, u, "b", 5*time.Second, time.Second),
		mustOpen(t, u, "c", 5*time.Second, time.Second),
	}
	for round := 0; round < 5; round++ {
		var mu sync.Mutex
		var won []claims.Claim
		var wg sync.WaitGroup
		for _, s := range stores {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := s.Acquire(ctx(t), "acme")
					if err == nil {
						mu.Lock()
						won = append(won, c)
						mu.Unlock()
					} else if !errors.Is(err, claims.ErrHeld) {
						t.Error(err)
					}
				}()
			}
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d winners, want 1", round, len(won))
		}
		if won[0].Epoch != uint64(round+1) {
			t.Fatalf("round %d: epoch %d, want %d", round, won[0].Epoch, round+1)
		}
		// The winner releases; the next round races again.
		for _, s := range stores {
			if err := s.Release(ctx(t), won[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestRebaseAndEpochLimit(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	a := mustOpen(t, u, "a", 5*time.Second, time.Second)
	ca, err := a.Acquire(ctx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	cr, err := a.Rebase(ctx(t), ca)
	if err != nil || cr.Epoch != ca.Epoch+1 {
		t.Fatalf("rebase: %+v %v", cr, err)
	}
	if _, err := a.Renew(ctx(t), ca); !errors.Is(err, claims.ErrLost) {
		t.Fatalf("renewing under the epoch before the rebase: %v, want ErrLost", err)
	}
	if _, err := a.Renew(ctx(t), cr); err != nil {
		t.Fatal(err)
	}

	// A family at the last epoch is never taken again, nor rebased.
	exec(t, u, `UPDATE muster_placement SET epoch = $1`, int64(claims.MaxEpoch))
	top := cr
	top.Epoch = claims.MaxEpoch
	if _, err := a.Rebase(ctx(t), top); !errors.Is(err, claims.ErrLost) {
		t.Fatalf("rebase at the last epoch: %v, want ErrLost", err)
	}
	if err := a.Release(ctx(t), top); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx(t), "acme"); !errors.Is(err, claims.ErrEpochLimit) {
		t.Fatalf("acquire at the last epoch: %v, want ErrEpochLimit", err)
	}
}

func TestHeartbeats(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	a := mustOpen(t, u, "a", time.Second, time.Second)
	b := mustOpen(t, u, "b", time.Second, time.Second)
	for _, s := range []*claims.Store{a, b} {
		if err := s.Heartbeat(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if live, err := a.LiveBrokers(ctx(t)); err != nil || len(live) != 2 || live[0] != "a" || live[1] != "b" {
		t.Fatalf("live: %v %v", live, err)
	}
	if err := b.Leave(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if live, _ := a.LiveBrokers(ctx(t)); len(live) != 1 || live[0] != "a" {
		t.Fatalf("after b left: %v", live)
	}
	time.Sleep(1200 * time.Millisecond)
	if live, _ := b.LiveBrokers(ctx(t)); len(live) != 0 {
		t.Fatalf("after the heartbeat TTL: %v", live)
	}
}

func TestOpenRefusesBadConfig(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	for name, cfg := range map[string]claims.Config{
		"no broker":    {Addr: "http://a"},
		"no address":   {Broker: "a"},
		"short TTL":    {Broker: "a", Addr: "http://a", TTL: 500 * time.Millisecond},
		"minus margin": {Broker: "a", Addr: "http://a", Margin: -time.Second},
	} {
		if s, err := claims.Open(ctx(t), u, cfg); err == nil {
			s.Close()
			t.Errorf("%s: opened", name)
		}
	}
	if _, err := claims.Open(ctx(t), "postgres://u:secret@[::1", claims.Config{Broker: "a", Addr: "http://a"}); err == nil ||
		strings.Contains(err.Error(), "secret") {
		t.Errorf("bad URL: %v (must fail without quoting the URL)", err)
	}
}

// TestCutOwnerStopsBeforeTakeover cuts the owner's connection silently (a
// proxy that stops forwarding bytes): its renewals fail within their
// context, and the takeover by another broker comes after the deadline the
// owner had to stop at.
func TestCutOwnerStopsBeforeTakeover(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	proxy := cutproxy.Start(t, pu.Host)
	viaProxy := *pu
	viaProxy.Host = proxy.Addr()
	q := viaProxy.Query()
	q.Set("connect_timeout", "1")
	viaProxy.RawQuery = q.Encode()

	const ttl, margin = 1500 * time.Millisecond, 500 * time.Millisecond
	a := mustOpen(t, viaProxy.String(), "a", ttl, margin)
	b := mustOpen(t, u, "b", ttl, margin)
	ca, err := a.Acquire(ctx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for time.Now().Before(ca.Deadline()) {
		rc, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_, err := a.Renew(rc, ca)
		cancel()
		if err == nil {
			t.Fatal("a renewal crossed a cut connection")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a renewal over a cut connection took %v: it must end with its context", d)
		}
	}
	var cb claims.Claim
	for {
		cb, err = b.Acquire(ctx(t), "acme")
		if err == nil {
			break
		}
		if !errors.Is(err, claims.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !ca.Deadline().Before(cb.Sent) {
		t.Fatalf("b took the family (sent %v) before a's deadline %v", cb.Sent, ca.Deadline())
	}
	if gap := cb.Sent.Sub(ca.Sent); gap < ttl+margin-50*time.Millisecond {
		t.Fatalf("b took the family %v after a's last renewal, want at least ttl+margin", gap)
	}
	if cb.Epoch != ca.Epoch+1 {
		t.Fatalf("takeover epoch %d, want %d", cb.Epoch, ca.Epoch+1)
	}
	proxy.Heal()
	var rerr error
	for range 20 { // the pool replaces the connections that lived through the cut
		if _, rerr = a.Renew(ctx(t), ca); errors.Is(rerr, claims.ErrLost) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(rerr, claims.ErrLost) {
		t.Fatalf("a's renewal after the heal: %v, want ErrLost", rerr)
	}
}

func exec(tb testing.TB, u, sql string, args ...any) {
	tb.Helper()
	c, err := pgx.Connect(ctx(tb), u)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx(tb), sql, args...); err != nil {
		tb.Fatal(err)
	}
}
