package placement

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// held is one grant in the history of a route: the broker that granted it,
// the token, and the window in which the lease was certainly held: from the
// grant's answer to the moment its end was asked, or to the kill (a zero to).
type held struct {
	broker   string
	route    string
	token    uint64
	from, to time.Time
}

// grantLog is the history of every grant the test saw.
type grantLog struct {
	mu     sync.Mutex
	grants []held
}

func (l *grantLog) add(h held) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grants = append(l.grants, h)
}

// waiterEnd is how one waiter queued on the owner ended.
type waiterEnd struct {
	err    error // the transport error of the queued acquire
	at     time.Time
	status int // what the old session got at the new owner
	code   string
	served time.Time // when the new owner first answered it
	token  uint64    // its grant at the new owner after a new session (0: lease_held)
}

// kill -9 of the owner under a lease workload: a holder, many waiters
// queued on its routes, a stream of short grants on a hot route, and
// observers configured with the other brokers (they follow the family to
// its owner). Another broker serves the family within claim TTL + margin +
// one loop period (the others answer only wrong_broker or
// family_unavailable meanwhile). Every waiter's queued acquire ends at once
// with the broken connection (not at its wait_ms), its session is not found
// at the new owner, and a new session gets it a token above everything the
// dead owner granted. No two brokers held one route in overlapping windows, and the
// observers re-bootstrap on the new owner: a new epoch, higher revisions,
// none of the dead broker's holders.
func TestKillNineWithWaitersAndObservers(t *testing.T) {
	const (
		routes  = 4
		waiters = 24 // six on each route
	)
	c := newCluster(t, 3, "acme")
	a := c.waitSettled("acme", c.brokers, 15*time.Second)
	rest := without(c.brokers, a)
	var log grantLog
	var killAt time.Time
	var killMu sync.Mutex
	killedAt := func() time.Time { killMu.Lock(); defer killMu.Unlock(); return killAt }

	// The holder of every waited route.
	holder, ans, err := newSession(a.url, "acme")
	if err != nil || holder == "" {
		t.Fatalf("holder session: %d %v", ans.status, err)
	}
	var aMax uint64
	for r := range routes {
		tok, ans, err := acquire(a.url, "acme", holder, fmt.Sprintf("w%d", r))
		if err != nil || tok == 0 {
			t.Fatalf("holder acquire: %d %v %v", ans.status, ans.body, err)
		}
		if tok < 1<<epochShift {
			t.Fatalf("a placed family's token %d lacks its placement epoch in the high bits", tok)
		}
		aMax = max(aMax, tok)
		log.add(held{broker: a.id, route: fmt.Sprintf("w%d", r), token: tok, from: time.Now()}) // to: the kill
	}

	// Observers configured with the surviving brokers: they follow the
	// family to a, then to the new owner.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var observers []*muster.Observer
	for _, b := range rest {
		observers = append(observers, observe(ctx, t, b))
	}
	var before []muster.View
	for _, obs := range observers {
		before = append(before, waitView(ctx, t, obs, func(v muster.View) bool { return has(v, "lease://r/a/w0") }))
	}

	// The waiters, queued on a behind the holder.
	waitClient := &http.Client{Timeout: time.Minute}
	ends := make([]waiterEnd, waiters)
	var queued, wg sync.WaitGroup
	for w := range waiters {
		s, ans, err := newSession(a.url, "acme")
		if err != nil || s == "" {
			t.Fatalf("waiter session: %d %v", ans.status, err)
		}
		route := fmt.Sprintf("w%d", w%routes)
		queued.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			queued.Done()
			ans, err := callOn(waitClient, a.url, "acme", "POST", "/v1/leases/r/a/"+route+"/acquire", map[string]any{"session_id": s, "ttl_ms": 30000, "wait_ms": 30000})
			if err == nil {
				t.Errorf("waiter %d on %s was answered %d %v before its broker died", w, route, ans.status, ans.body)
				return
			}
			ends[w] = waiterEnd{err: err, at: time.Now()}
			ends[w].status, ends[w].code, ends[w].token, ends[w].served = c.rejoin(t, rest, s, route, &log)
		}()
	}
	queued.Wait()

	// Short grants of a hot route on every live broker, before and after.
	stop := make(chan struct{})
	var hammer sync.WaitGroup
	hammer.Add(1)
	go func() {
		defer hammer.Done()
		live := c.brokers
		for {
			select {
			case <-stop:
				return
			default:
			}
			if k := killedAt(); !k.IsZero() {
				live = rest
			}
			for _, b := range live {
				hot(b, &log, killedAt)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second) // the waiters are queued, the hot route busy

	killMu.Lock()
	killAt = time.Now()
	killMu.Unlock()
	a.kill9(t)
	wg.Wait()
	next := c.waitOwner("acme", rest, 15*time.Second)
	// A lease of the new owner that the observers must see.
	s, _, err := newSession(next.url, "acme")
	if err != nil || s == "" {
		t.Fatal("session on the new owner")
	}
	if tok, ans, err := acquire(next.url, "acme", s, "after"); err != nil || tok <= aMax {
		t.Fatalf("acquire on the new owner: token %d (%d %v), the dead owner's highest %d", tok, ans.status, err, aMax)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	hammer.Wait()

	// Waiters: ended by the broken connection at the kill, not by wait_ms;
	// their sessions are gone at the new owner; a new session is served.
	granted := 0
	var served time.Time
	for w, e := range ends {
		if served.IsZero() || e.served.Before(served) {
			served = e.served
		}
		if d := e.at.Sub(killAt); d < 0 || d > 2*time.Second {
			t.Errorf("waiter %d's queued acquire ended %v after the kill (%v)", w, d, e.err)
		}
		if e.status != 404 || e.code != "session_not_found" {
			t.Errorf("waiter %d's session at the new owner: %d %s, want 404 session_not_found", w, e.status, e.code)
		}
		if e.token != 0 {
			granted++
			if e.token <= aMax {
				t.Errorf("waiter %d got token %d at the new owner, not above the dead owner's %d", w, e.token, aMax)
			}
		}
	}
	if granted != routes {
		t.Errorf("%d waiters got their route at the new owner, want one a route (%d)", granted, routes)
	}
	took := served.Sub(killAt)
	if bound := claimTTL + margin + renewEvery + time.Second; took > bound {
		t.Errorf("failover took %v, want at most %v", took, bound)
	}

	// The grant history: no two brokers held a route in overlapping
	// windows, and every grant after the kill is above every grant before.
	byRoute := map[string][]held{}
	var beforeMax, afterMin uint64
	for _, g := range log.grants {
		if g.to.IsZero() {
			g.to = killAt // held on the dead owner: certainly until the kill
		}
		byRoute[g.route] = append(byRoute[g.route], g)
		if g.broker == a.id {
			beforeMax = max(beforeMax, g.token)
		} else if afterMin == 0 || g.token < afterMin {
			afterMin = g.token
		}
	}
	if afterMin <= beforeMax {
		t.Errorf("a grant after the failover has token %d, not above the dead owner's %d", afterMin, beforeMax)
	}
	for route, gs := range byRoute {
		sort.Slice(gs, func(i, j int) bool { return gs[i].from.Before(gs[j].from) })
		for i := range gs {
			for j := i + 1; j < len(gs) && gs[j].from.Before(gs[i].to); j++ {
				if gs[i].broker != gs[j].broker {
					t.Errorf("route %s held by %s %v–%v and by %s from %v", route, gs[i].broker, gs[i].from, gs[i].to, gs[j].broker, gs[j].from)
				}
			}
		}
	}
	hot := len(byRoute["hot"])
	if hot < 10 {
		t.Errorf("only %d grants of the hot route", hot)
	}

	// Observers: re-bootstrapped on the new owner.
	old := map[string]bool{}
	for _, v := range before {
		for _, it := range v.Items {
			old[it.HolderIncarnation] = true
		}
	}
	for i, obs := range observers {
		v := waitView(ctx, t, obs, func(v muster.View) bool {
			if !has(v, "lease://r/a/after") {
				return false
			}
			for _, it := range v.Items {
				if old[it.HolderIncarnation] {
					return false
				}
			}
			return true
		})
		if v.Epoch == before[i].Epoch || v.Revision <= before[i].Revision {
			t.Errorf("observer %d after the failover: epoch %q revision %d; before: %q %d", i, v.Epoch, v.Revision, before[i].Epoch, before[i].Revision)
		}
	}
	t.Logf("failover after kill -9: %v; %d waiters ended within %v of the kill; %d grants in the history (%d of the hot route); observers re-bootstrapped on %s",
		took.Round(time.Millisecond), waiters, maxEnd(ends, killAt), len(log.grants), hot, next.id)
}

func maxEnd(ends []waiterEnd, from time.Time) time.Duration {
	var d time.Duration
	for _, e := range ends {
		d = max(d, e.at.Sub(from))
	}
	return d.Round(time.Millisecond)
}

// rejoin is a waiter after its broker died: it finds the new owner among
// live (following nothing: it tries each until one serves the family),
// first with its old session (what does the owner say?), then with a new
// one, acquiring route without waiting.
func (c *cluster) rejoin(t *testing.T, live []*broker, old, route string, log *grantLog) (int, string, uint64, time.Time) {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, b := range live {
			ans, err := call(b.url, "acme", "POST", "/v1/leases/r/a/"+route+"/acquire", map[string]any{"session_id": old, "ttl_ms": 30000, "wait_ms": 0})
			if err != nil || ans.status == 421 || ans.status == 503 {
				continue
			}
			served := time.Now()
			s, sa, err := newSession(b.url, "acme")
			if err != nil || s == "" {
				t.Errorf("new session at %s: %d %v", b.id, sa.status, err)
				return ans.status, ans.code(), 0, served
			}
			sent := time.Now()
			tok, ga, err := acquire(b.url, "acme", s, route)
			if err != nil || tok == 0 && ga.code() != "lease_held" {
				t.Errorf("acquire at %s with a new session: %d %v %v", b.id, ga.status, ga.body, err)
			}
			if tok != 0 {
				log.add(held{broker: b.id, route: route, token: tok, from: sent, to: time.Now().Add(time.Hour)})
			}
			return ans.status, ans.code(), tok, served
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("no broker served the family 15 s after the kill")
	return 0, "", 0, time.Time{}
}

// hot grants the hot route once on b, holds it 20 ms, ends the session, and
// logs the window in which the lease was certainly held.
func hot(b *broker, log *grantLog, killedAt func() time.Time) {
	s, _, err := newSession(b.url, "acme")
	if err != nil || s == "" {
		return
	}
	tok, _, err := acquire(b.url, "acme", s, "hot")
	if err != nil || tok == 0 {
		return
	}
	h := held{broker: b.id, route: "hot", token: tok, from: time.Now()}
	time.Sleep(20 * time.Millisecond)
	h.to = time.Now()
	if _, err := call(b.url, "acme", "DELETE", "/v1/sessions/"+s, nil); err != nil {
		if k := killedAt(); !k.IsZero() && k.Before(h.to) {
			h.to = k // the broker died holding it: certainly held until the kill
		}
	}
	log.add(h)
}
