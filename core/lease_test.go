package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

// leaseFixture drives a State with explicit time.
type leaseFixture struct {
	t   *testing.T
	s   *State
	now time.Time
}

func newLeaseFixture(t *testing.T, sessions ...byte) *leaseFixture {
	t.Helper()
	f := &leaseFixture{t: t, s: NewState(Config{Epoch: "e", IncarnationKey: []byte("k")}), now: t0}
	for _, b := range sessions {
		if _, err := f.s.CreateSession(f.now, SessionRequest{Family: "acme", ID: sid(b), OwnerID: fmt.Sprintf("owner-%d", b), TTL: MaxSessionTTL}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

var rA = Route{Realm: "acme", Area: "renderers", Resource: "doc-1"}
var rB = Route{Realm: "acme", Area: "renderers", Resource: "doc-2"}

func (f *leaseFixture) acquire(who byte, r Route, ttl, wait time.Duration) (Holding, Ticket, error) {
	return f.s.Acquire(f.now, AcquireRequest{Family: "acme", Session: sid(who), Route: r, TTL: ttl, Wait: wait})
}

func (f *leaseFixture) mustAcquire(who byte, r Route) Holding {
	f.t.Helper()
	h, ticket, err := f.acquire(who, r, 10*time.Second, 0)
	if err != nil || ticket != 0 {
		f.t.Fatalf("acquire by %d: ticket %d err %v", who, ticket, err)
	}
	return h
}

func (f *leaseFixture) events() []string {
	var out []string
	for _, e := range f.s.TakeEvents() {
		out = append(out, fmt.Sprintf("%s %s@%d", e.Kind, e.Key, e.Revision))
	}
	return out
}

func wantCode(t *testing.T, err error, code muster.Code) {
	t.Helper()
	if got := muster.ErrorCode(err); err == nil || got != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestAcquireFreeAndAlreadyHeld(t *testing.T) {
	f := newLeaseFixture(t, 1)
	h := f.mustAcquire(1, rA)
	if h.Outcome != OutcomeAcquired || Revision(h.Token) != f.s.Revision() || h.Token == 0 {
		t.Fatalf("grant = %+v at revision %d", h, f.s.Revision())
	}
	wantEvents(t, f.events(), "acquired acme/renderers/doc-1@1")
	f.now = f.now.Add(3 * time.Second)
	again := f.mustAcquire(1, rA)
	if again.Outcome != OutcomeAlreadyHeld || again.Token != h.Token || !again.Item.ExpiresAt().Equal(h.Item.ExpiresAt()) {
		t.Fatalf("second acquire = %+v, want already_held with the same token and expiry", again)
	}
	wantEvents(t, f.events())
}

func TestAcquireHeldNoWait(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	f.mustAcquire(1, rA)
	f.events()
	rev := f.s.Revision()
	_, _, err := f.acquire(2, rA, time.Second, 0)
	wantCode(t, err, muster.CodeLeaseHeld)
	if f.s.Revision() != rev {
		t.Fatal("a refused acquisition changed the revision")
	}
	wantEvents(t, f.events())
}

func TestWaitersFIFO(t *testing.T) {
	f := newLeaseFixture(t, 1, 2, 3, 4)
	h1 := f.mustAcquire(1, rA)
	var tickets []Ticket
	for _, who := range []byte{3, 2, 4} {
		_, ticket, err := f.acquire(who, rA, time.Second, 5*time.Second)
		if err != nil || ticket == 0 {
			t.Fatalf("queue %d: %v", who, err)
		}
		tickets = append(tickets, ticket)
	}
	if st := f.s.Query(f.now, "acme", rA); st.Waiters != 3 || st.Item.OwnerID() != "owner-1" {
		t.Fatalf("query = %+v", st)
	}
	f.events()
	if err := f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h1.Token}); err != nil {
		t.Fatal(err)
	}
	res := f.s.TakeResults()
	if len(res) != 1 || res[0].Ticket != tickets[0] || res[0].Err != nil || res[0].Grant.Item.OwnerID() != "owner-3" {
		t.Fatalf("first grant = %+v", res)
	}
	if res[0].Grant.Token <= h1.Token {
		t.Fatal("fencing token did not increase")
	}
	wantEvents(t, f.events(), "released acme/renderers/doc-1@2", "acquired acme/renderers/doc-1@3")
	if err := f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(3), Route: rA, Token: res[0].Grant.Token}); err != nil {
		t.Fatal(err)
	}
	if res = f.s.TakeResults(); len(res) != 1 || res[0].Ticket != tickets[1] || res[0].Grant.Item.OwnerID() != "owner-2" {
		t.Fatalf("second grant = %+v", res)
	}
}

func TestQueueLimits(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	f.mustAcquire(1, rA)
	if _, _, err := f.acquire(2, rA, time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	_, _, err := f.acquire(2, rA, time.Second, time.Second)
	wantCode(t, err, muster.CodeAlreadyQueued)
	for i := 0; i < MaxWaitersPerKey-1; i++ {
		var id SessionID
		id[0], id[1] = 0xee, byte(i)
		if _, err := f.s.CreateSession(f.now, SessionRequest{Family: "acme", ID: id, OwnerID: "w", TTL: MaxSessionTTL}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.s.Acquire(f.now, AcquireRequest{Family: "acme", Session: id, Route: rA, TTL: time.Second, Wait: time.Second}); err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	f.s.CreateSession(f.now, SessionRequest{Family: "acme", ID: sid(9), OwnerID: "w", TTL: MaxSessionTTL})
	_, _, err = f.acquire(9, rA, time.Second, time.Second)
	wantCode(t, err, muster.CodeQueueFull)
	// An exact-limit check: the holder asking again is not a waiter.
	if h := f.mustAcquire(1, rA); h.Outcome != OutcomeAlreadyHeld {
		t.Fatal("the holder was queued")
	}
}

func TestWaitTimeout(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	f.mustAcquire(1, rA)
	f.events()
	_, ticket, _ := f.acquire(2, rA, time.Second, 2*time.Second)
	f.now = f.now.Add(2 * time.Second)
	f.s.Tick(f.now)
	if r := f.s.TakeResults(); len(r) != 0 {
		t.Fatalf("timed out at the deadline instant: %+v", r)
	}
	f.now = f.now.Add(time.Nanosecond)
	f.s.Tick(f.now)
	r := f.s.TakeResults()
	if len(r) != 1 || r[0].Ticket != ticket {
		t.Fatalf("results = %+v", r)
	}
	wantCode(t, r[0].Err, muster.CodeWaitTimeout)
	wantEvents(t, f.events())
	if st := f.s.Query(f.now, "acme", rA); st.Waiters != 0 {
		t.Fatal("a timed-out waiter stayed queued")
	}
}

func TestCancelWait(t *testing.T) {
	f := newLeaseFixture(t, 1, 2, 3)
	h := f.mustAcquire(1, rA)
	_, t2, _ := f.acquire(2, rA, time.Second, 5*time.Second)
	_, t3, _ := f.acquire(3, rA, time.Second, 5*time.Second)
	if !f.s.CancelWait(t2) {
		t.Fatal("cancel of a queued waiter failed")
	}
	f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token})
	r := f.s.TakeResults()
	if len(r) != 1 || r[0].Ticket != t3 {
		t.Fatalf("after cancel the grant went to %+v", r)
	}
	if f.s.CancelWait(t3) {
		t.Fatal("cancel of a granted ticket reported removal")
	}
}

func TestExtend(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	h := f.mustAcquire(1, rA)
	old := h.Item
	f.events()
	f.now = f.now.Add(5 * time.Second)
	rev := f.s.Revision()
	e, err := f.s.Extend(f.now, ExtendRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token, TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if e.Token != h.Token || e.Outcome != OutcomeNone || e.Item.Renewals() != 1 || !e.Item.ExpiresAt().Equal(f.now.Add(20*time.Second)) {
		t.Fatalf("extend = %+v", e.Item)
	}
	if f.s.Revision() != rev+1 {
		t.Fatal("renewal did not advance the revision")
	}
	if old.Renewals() != 0 || !old.ExpiresAt().Equal(t0.Add(10*time.Second)) {
		t.Fatal("renewal mutated the previous Item (snapshots would see it)")
	}
	wantEvents(t, f.events())
	_, err = f.s.Extend(f.now, ExtendRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token + 100, TTL: time.Second})
	wantCode(t, err, muster.CodeFenced)
	_, err = f.s.Extend(f.now, ExtendRequest{Family: "acme", Session: sid(2), Route: rA, Token: h.Token, TTL: time.Second})
	wantCode(t, err, muster.CodeNotOwner)
	f.now = f.now.Add(21 * time.Second)
	_, err = f.s.Extend(f.now, ExtendRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token, TTL: time.Second})
	wantCode(t, err, muster.CodeLeaseExpired)
}

func TestRelease(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	if err := f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: 1}); err != nil {
		t.Fatalf("release of a free lease: %v", err)
	}
	h := f.mustAcquire(1, rA)
	wantCode(t, f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(2), Route: rA, Token: h.Token}), muster.CodeNotOwner)
	wantCode(t, f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token - 1}), muster.CodeFenced)
	f.events()
	if err := f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token}); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, f.events(), "released acme/renderers/doc-1@2")
	var unknown SessionID
	wantCode(t, f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: unknown, Route: rA, Token: 1}), muster.CodeSessionNotFound)
}

func TestExpiryNeverEarly(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	h := f.mustAcquire(1, rA)
	_, ticket, _ := f.acquire(2, rA, time.Second, 20*time.Second)
	f.events()
	f.now = f.now.Add(10 * time.Second) // exactly the expiry instant
	if st := f.s.Query(f.now, "acme", rA); st.Item == nil {
		t.Fatal("expired at its expiry instant")
	}
	f.now = f.now.Add(time.Nanosecond)
	st := f.s.Query(f.now, "acme", rA) // a read processes due expiry, no tick needed
	if st.Item == nil || st.Item.OwnerID() != "owner-2" {
		t.Fatalf("after expiry the waiter should hold it: %+v", st)
	}
	wantEvents(t, f.events(), "expired acme/renderers/doc-1@2", "acquired acme/renderers/doc-1@3")
	if r := f.s.TakeResults(); len(r) != 1 || r[0].Ticket != ticket || r[0].Grant.Token <= h.Token {
		t.Fatalf("results = %+v", r)
	}
}

func TestSessionEndReleasesEverything(t *testing.T) {
	f := newLeaseFixture(t, 1, 2, 3)
	f.mustAcquire(1, rA)
	f.mustAcquire(1, rB)
	f.mustAcquire(3, Route{"acme", "x", "y"})
	_, t2, _ := f.acquire(2, rA, time.Second, 20*time.Second)
	_, t1, _ := f.acquire(1, Route{"acme", "x", "y"}, time.Second, 20*time.Second)
	f.events()
	if err := f.s.EndSession(f.now, "acme", sid(1)); err != nil {
		t.Fatal(err)
	}
	got := f.events()
	wantEvents(t, got, "session_closed acme/renderers/doc-2@4", "session_closed acme/renderers/doc-1@5", "acquired acme/renderers/doc-1@6")
	res := map[Ticket]WaitResult{}
	for _, r := range f.s.TakeResults() {
		res[r.Ticket] = r
	}
	wantCode(t, res[t1].Err, muster.CodeSessionNotFound)
	if res[t2].Err != nil || res[t2].Grant.Item.OwnerID() != "owner-2" {
		t.Fatalf("waiter of a released lease: %+v", res[t2])
	}
	// A request racing the end finds no session and brings nothing back.
	_, _, err := f.acquire(1, rB, time.Second, 0)
	wantCode(t, err, muster.CodeSessionNotFound)
	if st := f.s.Query(f.now, "acme", rB); st.Item != nil {
		t.Fatal("a closed session's lease came back")
	}
}

func TestRollback(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	h := f.mustAcquire(1, rA)
	_, ticket, _ := f.acquire(2, rA, time.Second, 20*time.Second)
	f.events()
	f.s.Rollback(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token + 1}) // stale: nothing
	wantEvents(t, f.events())
	f.s.Rollback(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token})
	wantEvents(t, f.events(), "rolled_back acme/renderers/doc-1@2", "acquired acme/renderers/doc-1@3")
	if r := f.s.TakeResults(); len(r) != 1 || r[0].Ticket != ticket {
		t.Fatalf("next waiter not granted after rollback: %+v", r)
	}
}

func TestFamiliesAreSeparateUniverses(t *testing.T) {
	f := newLeaseFixture(t, 1)
	f.s.CreateSession(f.now, SessionRequest{Family: "beta", ID: sid(2), OwnerID: "owner-2", TTL: MaxSessionTTL})
	f.mustAcquire(1, rA)
	if _, _, err := f.s.Acquire(f.now, AcquireRequest{Family: "beta", Session: sid(2), Route: rA, TTL: time.Second}); err != nil {
		t.Fatalf("the same route in another family: %v", err)
	}
	if st := f.s.Query(f.now, "beta", rA); st.Item.OwnerID() != "owner-2" {
		t.Fatal("families share a lease")
	}
	// A session cannot act in another family.
	_, _, err := f.s.Acquire(f.now, AcquireRequest{Family: "beta", Session: sid(1), Route: rB, TTL: time.Second})
	wantCode(t, err, muster.CodeSessionNotFound)
}

func TestLeaseBoundsLeaveNoState(t *testing.T) {
	f := newLeaseFixture(t, 1)
	for _, tc := range []struct{ ttl, wait time.Duration }{
		{MinLeaseTTL - 1, 0}, {MaxLeaseTTL + 1, 0}, {time.Second, -1}, {time.Second, MaxWait + 1},
	} {
		_, _, err := f.acquire(1, rA, tc.ttl, tc.wait)
		wantCode(t, err, muster.CodeInvalidRequest)
	}
	if f.s.Revision() != 0 || f.s.Stats().Leases != 0 {
		t.Fatal("invalid input left state behind")
	}
}

// ExpiresAfterRequest is the lease's expiry measured from the acquisition's
// arrival: what a client adds to its send time for a local deadline that
// is never later than the broker's expiry, and close to it after a wait.
func TestExpiresAfterRequest(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	h1 := f.mustAcquire(1, rA) // TTL 10 s, at once
	if h1.ExpiresAfterRequest != 10*time.Second {
		t.Fatalf("at once: %v, want the TTL", h1.ExpiresAfterRequest)
	}
	arrived := f.now
	if _, ticket, err := f.acquire(2, rA, 3*time.Second, 30*time.Second); err != nil || ticket == 0 {
		t.Fatalf("queue: %v", err)
	}
	f.now = f.now.Add(2700 * time.Millisecond)
	if again := f.mustAcquire(1, rA); again.ExpiresAfterRequest != 10*time.Second-2700*time.Millisecond {
		t.Fatalf("already held: %v, want what is left (7.3 s)", again.ExpiresAfterRequest)
	}
	if err := f.s.Release(f.now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h1.Token}); err != nil {
		t.Fatal(err)
	}
	res := f.s.TakeResults()
	if len(res) != 1 || res[0].Err != nil {
		t.Fatalf("grant = %+v", res)
	}
	g := res[0].Grant
	if g.ExpiresAfterRequest != 5700*time.Millisecond {
		t.Fatalf("after a wait of 2.7 s: %v, want 5.7 s (wait + TTL)", g.ExpiresAfterRequest)
	}
	if expiry := time.Unix(0, g.Item.expiresAt); !arrived.Add(g.ExpiresAfterRequest).Equal(expiry) {
		t.Fatalf("arrival + %v = %v, the expiry is %v", g.ExpiresAfterRequest, arrived.Add(g.ExpiresAfterRequest), expiry)
	}
}

// A grant keeps a short key in its own bytes and a long one as its own
// string; either way the key is the route's.
func TestGrantedKeyOf(t *testing.T) {
	for _, n := range []int{1, 22, 23, 24, 25, 200} {
		r := Route{Realm: "r", Area: "a", Resource: strings.Repeat("x", n)}
		g := &granted{}
		if got := g.keyOf(r); got != r.Key() {
			t.Fatalf("resource of %d: key %q, want %q", n, got, r.Key())
		}
	}
}
