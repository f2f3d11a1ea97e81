package placement

import (
	"bufio"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/pgtest"
)

// Three brokers, six families: each family settles on exactly one broker,
// the others send its clients there, and the families are spread.
func TestEachFamilyServedOnce(t *testing.T) {
	fams := []string{"acme", "beta", "gamma", "delta", "eps", "zeta"}
	c := newCluster(t, 3, fams...)
	// The first broker up takes every family; the others' arrival moves
	// some to them (planned moves). Wait for the spread to settle.
	var used map[string]int
	for deadline := time.Now().Add(15 * time.Second); ; {
		used = map[string]int{}
		for _, fam := range fams {
			o := c.waitOwner(fam, c.brokers, 15*time.Second)
			used[o.id]++
		}
		if len(used) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("six families on %d broker(s) of three: %v", len(used), used)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("spread: %v", used)
	// The claims gauge of the brokers adds up to the families.
	total := 0.0
	for _, b := range c.brokers {
		total += metric(t, b, "muster_placement_claims")
	}
	if total != float64(len(fams)) {
		t.Fatalf("muster_placement_claims adds up to %v over the brokers, want %d", total, len(fams))
	}
	// A fleet operation (the shared desired set) is answered by every broker.
	for _, b := range c.brokers {
		a, err := call(b.url, "acme", "GET", "/v1/fleets/app/specs", nil)
		if err != nil || a.status != 200 {
			t.Fatalf("fleet read on %s: %d %v", b.id, a.status, err)
		}
		// Every answer names the broker that gave it.
		if got := a.header.Get("Muster-Broker"); got != b.id {
			t.Fatalf("Muster-Broker from %s: %q", b.id, got)
		}
	}
}

// grant is one successful acquisition seen by the test.
type grant struct {
	broker string
	at     time.Time
	token  uint64
}

// A broker cut from PostgreSQL while its clients still reach it stops
// granting within the claim TTL; the family's next grant, on another
// broker, comes after its last one, with a higher token.
func TestCutBrokerStopsBeforeTakeover(t *testing.T) {
	c := newCluster(t, 2, "acme")
	a := c.waitSettled("acme", c.brokers, 15*time.Second)
	other := without(c.brokers, a)[0]

	var history []grant
	// hammer grants one route at a time on every broker: acquire, then end
	// the session (releasing it), over and over.
	try := func(b *broker) {
		s, _, err := newSession(b.url, "acme")
		if err != nil || s == "" {
			return
		}
		tok, _, err := acquire(b.url, "acme", s, "hot")
		if err == nil && tok != 0 {
			history = append(history, grant{b.id, time.Now(), tok})
		}
		_, _ = call(b.url, "acme", "DELETE", "/v1/sessions/"+s, nil)
	}
	for range 5 {
		try(a)
	}
	// A holder and a waiter on the broker about to be cut: the waiter must
	// be answered (not granted) by the deadline.
	holder, _, _ := newSession(a.url, "acme")
	if tok, ans, err := acquire(a.url, "acme", holder, "held"); err != nil || tok == 0 {
		t.Fatalf("holder: %d %v", ans.status, err)
	}
	waiter, _, _ := newSession(a.url, "acme")
	type waited struct {
		a  answer
		at time.Time
	}
	waitDone := make(chan waited, 1)
	go func() {
		ans, _ := call(a.url, "acme", "POST", "/v1/leases/r/a/held/acquire", map[string]any{"session_id": waiter, "ttl_ms": 30000, "wait_ms": 30000})
		waitDone <- waited{ans, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	cut := time.Now()
	a.proxy.Cut()
	var aRefused time.Time
	for time.Since(cut) < claimTTL+margin+5*time.Second {
		try(a)
		try(other)
		if aRefused.IsZero() {
			if _, ans, err := newSession(a.url, "acme"); err == nil && ans.status != 201 {
				aRefused = time.Now()
				unavailable := ans.status == 503 && ans.code() == "family_unavailable" && ans.header.Get("Retry-After") != ""
				toPeer := ans.status == 421 && ans.code() == "wrong_broker" && ans.body["owner"] == other.url
				if !unavailable && !toPeer {
					t.Errorf("the cut broker answered %d %v, want 503 family_unavailable with Retry-After, or 421 naming %s", ans.status, ans.body, other.url)
				}
			}
		}
		if n := len(history); n > 0 && history[n-1].broker == other.id && !aRefused.IsZero() {
			break
		}
	}
	if aRefused.IsZero() {
		t.Fatal("the cut broker never stopped serving the family")
	}
	if d := aRefused.Sub(cut); d > claimTTL {
		t.Fatalf("the cut broker stopped %v after the cut, want within the claim TTL %v", d, claimTTL)
	}
	select {
	case w := <-waitDone:
		answered := (w.a.status == 503 && w.a.code() == "family_unavailable") || (w.a.status == 421 && w.a.body["owner"] == other.url)
		if !answered || w.at.Sub(cut) > claimTTL {
			t.Fatalf("the waiter on the cut broker: %d %v after %v", w.a.status, w.a.body, w.at.Sub(cut))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter on the cut broker was never answered")
	}
	sort.SliceStable(history, func(i, j int) bool { return history[i].at.Before(history[j].at) })
	var lastA, firstB grant
	for _, g := range history {
		if g.broker == a.id {
			lastA = g
		} else if firstB.broker == "" {
			firstB = g
		}
	}
	if firstB.broker == "" {
		t.Fatalf("no broker took over within the test; history %+v", history)
	}
	if !lastA.at.Before(firstB.at) || lastA.token >= firstB.token {
		t.Fatalf("overlap: cut broker's last grant %+v, takeover's first %+v", lastA, firstB)
	}
	for _, g := range history {
		if g.broker == a.id && g.at.After(firstB.at) {
			t.Fatalf("the cut broker granted at %v, after the takeover's first grant at %v", g.at, firstB.at)
		}
	}
	t.Logf("cut at 0; cut broker refused at %v; takeover's first grant at %v", aRefused.Sub(cut), firstB.at.Sub(cut))

	// Healed, the brokers agree on one owner again (the cut broker may get
	// the family back by a planned move: it is its desired owner).
	a.proxy.Heal()
	o := c.waitOwner("acme", c.brokers, 10*time.Second)
	t.Logf("after the heal the family is on %s", o.id)
}

// SIGTERM is a planned move: the family is released, not left to expire,
// so another broker serves it within about one loop period.
func TestShutdownHandsOver(t *testing.T) {
	c := newCluster(t, 2, "acme")
	old := c.waitSettled("acme", c.brokers, 15*time.Second)
	rest := without(c.brokers, old)
	start := time.Now()
	old.term(t)
	o := c.waitOwner("acme", rest, 10*time.Second)
	took := time.Since(start)
	t.Logf("handover after SIGTERM: %v", took)
	if took >= claimTTL+margin {
		t.Fatalf("handover took %v: the claim expired instead of being released", took)
	}
	_ = o
}

// TestShutdownAnswersWaitersFirst: SIGTERM of an owner gives its families
// up before the HTTP drain, so a queued acquire (wait_ms 25 s) is answered
// (421 or 503: the family left this broker), not cut off by the drain, and
// the broker exits without waiting out the drain's 10 s. It used to hold
// the claims until the drain ended: the waiter got EOF after 10 s and the
// family was unavailable for longer than after kill -9.
func TestShutdownAnswersWaitersFirst(t *testing.T) {
	c := newCluster(t, 2, "acme")
	old := c.waitSettled("acme", c.brokers, 15*time.Second)
	rest := without(c.brokers, old)
	holder, a, err := newSession(old.url, "acme")
	if err != nil || holder == "" {
		t.Fatalf("session: %d %v", a.status, err)
	}
	if tok, a, err := acquire(old.url, "acme", holder, "job"); err != nil || tok == 0 {
		t.Fatalf("acquire: %d %v", a.status, err)
	}
	waiter, a, err := newSession(old.url, "acme")
	if err != nil || waiter == "" {
		t.Fatalf("session: %d %v", a.status, err)
	}
	type result struct {
		a   answer
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		a, err := callOn(&http.Client{Timeout: 40 * time.Second}, old.url, "acme", "POST", "/v1/leases/r/a/job/acquire",
			map[string]any{"session_id": waiter, "ttl_ms": 30000, "wait_ms": 25000})
		done <- result{a, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is queued
	start := time.Now()
	old.term(t)
	exited := time.Since(start)
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter got no answer")
	}
	if r.err != nil || (r.a.status != http.StatusMisdirectedRequest && r.a.status != http.StatusServiceUnavailable) {
		t.Fatalf("the waiter got %d %q (%v), want 421 or 503: an answer, not a cut connection", r.a.status, r.a.code(), r.err)
	}
	o := c.waitOwner("acme", rest, 10*time.Second)
	took := time.Since(start)
	t.Logf("SIGTERM: waiter answered %d %s after %v, broker exited after %v, family served by %s after %v",
		r.a.status, r.a.code(), r.at.Sub(start).Round(time.Millisecond), exited.Round(time.Millisecond), o.id, took.Round(time.Millisecond))
	if w := r.at.Sub(start); w > 2*time.Second {
		t.Fatalf("the waiter was answered %v after SIGTERM: the family was given up late", w)
	}
	if exited > 5*time.Second {
		t.Fatalf("the broker exited %v after SIGTERM: it waited out the drain", exited)
	}
	if took >= claimTTL+margin {
		t.Fatalf("handover took %v: the claim expired instead of being released", took)
	}
	if n := metric(t, o, `muster_placement_moves_total{cause="handover"}`); n != 1 {
		t.Fatalf("the new owner counts %v handovers, want 1", n)
	}
}

// A PostgreSQL restart longer than the claim TTL: every broker stops
// serving (family_unavailable) by its deadline; once the server is back the
// family is served again, as a new epoch with higher tokens.
func TestPostgresRestart(t *testing.T) {
	pg := pgtest.StartPrivate(t)
	if pg == nil {
		t.Skip("MUSTER_TEST_PG=off: PostgreSQL tests skipped on request")
	}
	c := newClusterOn(t, pg.URL, 2, "acme")
	old := c.waitSettled("acme", c.brokers, 15*time.Second)
	s, a, err := newSession(old.url, "acme")
	if err != nil || s == "" {
		t.Fatalf("session: %d %v", a.status, err)
	}
	before, a, err := acquire(old.url, "acme", s, "job")
	if err != nil || before == 0 {
		t.Fatalf("acquire: %d %v", a.status, err)
	}

	stopped := time.Now()
	pg.Stop()
	// By the deadline (at most the claim TTL after the stop) nobody serves.
	time.Sleep(time.Until(stopped.Add(claimTTL)))
	for _, b := range c.brokers {
		if _, a, err := newSession(b.url, "acme"); err != nil || a.status != 503 || a.code() != "family_unavailable" {
			t.Fatalf("%s with PostgreSQL down for the claim TTL: %d %v %v", b.id, a.status, a.body, err)
		}
	}
	pg.Start()
	back := time.Now()
	o := c.waitSettled("acme", c.brokers, 15*time.Second)
	t.Logf("served again %v after PostgreSQL came back", time.Since(back))
	s, a, err = newSession(o.url, "acme")
	if err != nil || s == "" {
		t.Fatalf("session after the restart: %d %v", a.status, err)
	}
	after, a, err := acquire(o.url, "acme", s, "job")
	if err != nil || after <= before {
		t.Fatalf("token after the restart %d (%d %v), before %d", after, a.status, err, before)
	}
}

// metric reads one unlabelled sample from b's /metrics.
func metric(t *testing.T, b *broker, name string) float64 {
	t.Helper()
	resp, err := http.Get(b.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no sample %s", b.id, name)
	return 0
}

// TestColdStartNoHerd: brokers started together take each family once, by
// its desired owner. A broker takes free families only after heartbeating
// for a whole round, so the first one up no longer claims every family and
// hands most of them away a round later (a second restart for them).
func TestColdStartNoHerd(t *testing.T) {
	fams := []string{"acme", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"}
	c := newClusterTimed(t, defaults, 3, fams...)
	for _, fam := range fams {
		c.waitOwner(fam, c.brokers, 30*time.Second)
	}
	// A herd's moves come within two rounds: the first broker gives a
	// family up at its next round, its desired owner takes it at one of
	// its own.
	time.Sleep(2 * defaults.every)
	var takeovers, releases, initial float64
	for _, b := range c.brokers {
		takeovers += metric(t, b, "muster_placement_takeovers_total")
		releases += metric(t, b, "muster_placement_releases_total")
		initial += metric(t, b, `muster_placement_moves_total{cause="initial"}`)
	}
	if initial != takeovers {
		t.Errorf("moves by cause initial %v, acquisitions %v: every acquisition of a cold start is initial", initial, takeovers)
	}
	t.Logf("cold start of 3 brokers, %d families: %v acquisitions, %v releases", len(fams), takeovers, releases)
	if takeovers != float64(len(fams)) || releases != 0 {
		t.Fatalf("%v acquisitions and %v releases for %d families: a herd (want each family acquired once, none handed away)", takeovers, releases, len(fams))
	}
}
