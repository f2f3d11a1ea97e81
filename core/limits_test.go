package core

import (
	"testing"
	"time"

	"github.com/musterhq/muster"
)

// SetLimits: a lowered quota refuses new sessions and waiters and keeps
// what exists (keepalive, acquire and extend go on); a raised one admits at
// once; the epoch and the incarnation key stay.
func TestSetLimits(t *testing.T) {
	s := quotaState(Quota{Sessions: 3}, nil)
	for i := byte(1); i <= 3; i++ {
		if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewRoute("r", "a", "x")
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := s.Acquire(t0, AcquireRequest{Family: "a", Session: sid(1), Route: r, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Limits()

	s.SetLimits(Config{MaxSessions: 5, FamilyQuota: Quota{Sessions: 1}})
	if got := s.Limits(); got.FamilyQuota.Sessions != 1 || got.MaxSessions != 5 || got.MaxStreams != DefaultMaxStreams {
		t.Fatalf("limits after SetLimits: %+v", got)
	}
	if s.Epoch() != "e" || string(s.cfg.IncarnationKey) != "k" {
		t.Fatalf("SetLimits changed the epoch: %q %q", s.Epoch(), s.cfg.IncarnationKey)
	}
	_, err = s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(4), OwnerID: "w", TTL: time.Minute})
	wantLimit(t, err, muster.CodeSessionLimit, muster.ScopeFamily)
	for i := byte(1); i <= 3; i++ {
		if _, err := s.Keepalive(t0.Add(time.Second), "a", sid(i)); err != nil {
			t.Fatalf("keepalive of session %d over the lowered quota: %v", i, err)
		}
	}
	if _, err := s.Extend(t0.Add(time.Second), ExtendRequest{Family: "a", Session: sid(1), Route: r, Token: h.Token, TTL: time.Minute}); err != nil {
		t.Fatalf("extend over the lowered quota: %v", err)
	}
	if fs := s.FamilyStats(); fs["a"].Sessions != 3 {
		t.Fatalf("sessions after lowering: %d, want 3 kept", fs["a"].Sessions)
	}

	s.SetLimits(before)
	if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(4), OwnerID: "w", TTL: time.Minute}); err == nil {
		t.Fatal("4 sessions under a quota of 3")
	}
	s.SetLimits(Config{FamilyQuotas: map[Family]Quota{"a": {Sessions: 4}}})
	if _, err := s.CreateSession(t0, SessionRequest{Family: "a", ID: sid(4), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatalf("after raising: %v", err)
	}
}
