package core

import (
	"errors"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

// wantLimit checks a limit error's code and scope.
func wantLimit(t *testing.T, err error, code muster.Code, scope muster.Scope) {
	t.Helper()
	var e *muster.Error
	if !errors.As(err, &e) || e.Code != code || e.Scope != scope {
		t.Fatalf("err = %#v, want %s with scope %s", err, code, scope)
	}
}

func quotaState(q Quota, over map[Family]Quota) *State {
	return NewState(Config{Epoch: "e", IncarnationKey: []byte("k"),
		MaxSessions: 5, MaxStreams: 5, MaxRegistrations: 8, MaxWaiters: 4, MaxSnapshots: 64, MaxCallerSnapshots: 64,
		FamilyQuota: q, FamilyQuotas: over})
}

// A family at its session quota is refused with scope family; another
// family still gets sessions until the broker-wide cap (scope broker).
func TestQuotaSessions(t *testing.T) {
	s := quotaState(Quota{Sessions: 2}, map[Family]Quota{"big": {Sessions: 3}})
	for i := byte(1); i <= 2; i++ {
		if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(3), OwnerID: "w", TTL: time.Minute})
	wantLimit(t, err, muster.CodeSessionLimit, muster.ScopeFamily)
	for i := byte(10); i < 13; i++ { // the override: 3
		if _, err := s.CreateSession(t0, SessionRequest{Family: "big", ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatalf("family big, session %d: %v", i-9, err)
		}
	}
	_, err = s.CreateSession(t0, SessionRequest{Family: "c", ID: sid(20), OwnerID: "w", TTL: time.Minute}) // 5 live: the broker cap
	wantLimit(t, err, muster.CodeSessionLimit, muster.ScopeBroker)
	if err := s.EndSession(t0, "a", sid(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(4), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatalf("a slot freed by the family: %v", err)
	}
	// Expiry frees quota too.
	s.Tick(t0.Add(2 * time.Minute))
	if fs := s.FamilyStats(); fs["a"].Sessions != 0 || fs["big"].Sessions != 0 || fs["a"].SessionsRefused != 1 {
		t.Fatalf("after expiry: %+v", fs)
	}
}

// Streams and registrations: family a at its quota, family b untouched.
func TestQuotaStreamsAndRegistrations(t *testing.T) {
	s := quotaState(Quota{Streams: 2, Registrations: 3}, nil)
	one := []Selector{mustSel(t, "lease://**")}
	two := []Selector{mustSel(t, "lease://x/**"), mustSel(t, "lease://y/z/w")}
	if _, err := s.Subscribe(t0, 1, SubscribeRequest{Family: "a", Anon: sid(101), Selectors: two, Caller: "c"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Subscribe(t0, 2, SubscribeRequest{Family: "a", Anon: sid(102), Selectors: two, Caller: "c"}) // 4 registrations > 3
	wantLimit(t, err, muster.CodeSubscriptionLimit, muster.ScopeFamily)
	if _, err := s.Subscribe(t0, 3, SubscribeRequest{Family: "a", Anon: sid(103), Selectors: one, Caller: "c"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Subscribe(t0, 4, SubscribeRequest{Family: "a", Anon: sid(104), Selectors: one, Caller: "c"}) // a third stream
	wantLimit(t, err, muster.CodeSubscriptionLimit, muster.ScopeFamily)
	for i, sels := range [][]Selector{two, one} {
		if _, err := s.Subscribe(t0, StreamID(10+i), SubscribeRequest{Family: "b", Anon: sid(byte(110 + i)), Selectors: sels, Caller: "c"}); err != nil {
			t.Fatalf("family b, stream %d: %v", i, err)
		}
	}
	// 3 + 3 registrations live; 2 more pass the broker's 7.
	s.cfg.MaxRegistrations = 7
	_, err = s.Subscribe(t0, 20, SubscribeRequest{Family: "c", Anon: sid(120), Selectors: two, Caller: "c"})
	wantLimit(t, err, muster.CodeSubscriptionLimit, muster.ScopeBroker)
	s.DropStream(1)
	if _, err := s.Subscribe(t0, 5, SubscribeRequest{Family: "a", Anon: sid(105), Selectors: one, Caller: "c"}); err != nil {
		t.Fatalf("after the family dropped a stream: %v", err)
	}
	if fs := s.FamilyStats()["a"]; fs.Streams != 2 || fs.Registrations != 2 || fs.StreamsRefused != 1 || fs.RegistrationsRefused != 1 {
		t.Fatalf("family a: %+v", fs)
	}
	for _, st := range []StreamID{3, 5, 10, 11} {
		s.DropStream(st)
	}
	for f, fs := range s.FamilyStats() {
		if fs.Streams != 0 || fs.Registrations != 0 {
			t.Errorf("family %s after every stream ended: %+v", f, fs)
		}
	}
	if st := s.Stats(); st.Sessions != 0 || st.Streams != 0 {
		t.Errorf("stats after every stream ended: %+v", st)
	}
}

// Waiters: the family's quota, then the broker's cap, then the route's.
func TestQuotaWaiters(t *testing.T) {
	s := quotaState(Quota{Waiters: 1, Sessions: 5}, nil)
	s.cfg.MaxSessions = 10
	r := mustRoute(t, "lease://x/y/z")
	for i := byte(1); i <= 6; i++ {
		fam := Family("a")
		if i > 3 {
			fam = "b"
		}
		if _, err := s.CreateSession(t0, SessionRequest{Family: fam, ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(1), Route: r, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, ticket, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(2), Route: r, TTL: time.Minute, Wait: time.Second})
	if err != nil || ticket == 0 {
		t.Fatalf("first waiter: %v", err)
	}
	_, _, err = s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(3), Route: r, TTL: time.Minute, Wait: time.Second})
	wantLimit(t, err, muster.CodeQueueFull, muster.ScopeFamily)
	if _, _, err := s.Acquire(t0, AcquireRequest{Family: "b", Session: sid(4), Route: r, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, tk, err := s.Acquire(t0, AcquireRequest{Family: "b", Session: sid(5), Route: r, TTL: time.Minute, Wait: time.Second}); err != nil || tk == 0 {
		t.Fatalf("family b waits while a is at its quota: %v", err)
	}
	s.CancelWait(ticket)
	if _, tk, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(3), Route: r, TTL: time.Minute, Wait: time.Second}); err != nil || tk == 0 {
		t.Fatalf("after the family's waiter left: %v", err)
	}
	s.Tick(t0.Add(2 * time.Second)) // both waits time out
	if fs := s.FamilyStats(); fs["a"].Waiters != 0 || fs["b"].Waiters != 0 || fs["a"].WaitersRefused != 1 {
		t.Fatalf("after the waits ended: %+v", fs)
	}
}

func TestQuotaWaitersBrokerCap(t *testing.T) {
	s := quotaState(Quota{}, nil)
	s.cfg.MaxSessions, s.cfg.MaxWaiters = 10, 2
	for i := byte(1); i <= 4; i++ {
		if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRoute(t, "lease://x/y/z")
	if _, _, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(1), Route: r, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := byte(2); i <= 3; i++ {
		if _, _, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(i), Route: r, TTL: time.Minute, Wait: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(4), Route: r, TTL: time.Minute, Wait: time.Second})
	wantLimit(t, err, muster.CodeQueueFull, muster.ScopeBroker)
}

// A family that churns snapshots evicts its own, never another family's.
func TestQuotaSnapshots(t *testing.T) {
	s := quotaState(Quota{Snapshots: 2}, nil)
	other := s.OpenSnapshot(t0, "b", "b-reader")
	first := s.OpenSnapshot(t0, "a", "a-1")
	for i := range 10 {
		s.OpenSnapshot(t0, "a", "a-"+string(rune('2'+i)))
	}
	if _, err := s.ResumeSnapshot(t0, "b", other.ID); err != nil {
		t.Fatalf("family b's snapshot was evicted by a's churn: %v", err)
	}
	if _, err := s.ResumeSnapshot(t0, "a", first.ID); err == nil {
		t.Fatal("family a kept more than its quota")
	}
	if fs := s.FamilyStats(); fs["a"].Snapshots != 2 || fs["b"].Snapshots != 1 || fs["a"].SnapshotsEvicted != 9 {
		t.Fatalf("family stats: %+v", fs)
	}
}

func mustRoute(t testing.TB, s string) Route {
	t.Helper()
	r, err := ParseRoute(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
