package core

import (
	"testing"
	"time"

	"github.com/musterhq/muster"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func testState(tb testing.TB) *State {
	tb.Helper()
	return NewState(Config{Epoch: "e1", IncarnationKey: []byte("k1"), MaxSessions: 4})
}

func sid(b byte) SessionID { var id SessionID; id[0] = b; id[15] = b; return id }

func TestSessionLifecycle(t *testing.T) {
	s := testState(t)
	info, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "worker-1", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.ExpiresAt, t0.Add(10*time.Second); !got.Equal(want) {
		t.Fatalf("expires_at = %v, want %v", got, want)
	}
	// Keepalive at t0+9s moves expiry to t0+19s.
	k, err := s.Keepalive(t0.Add(9*time.Second), "acme", sid(1))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.ExpiresAt, t0.Add(19*time.Second); !got.Equal(want) {
		t.Fatalf("after keepalive expires_at = %v, want %v", got, want)
	}
	// Exactly at the expiry instant the session is still live (TTL is a lower bound).
	if _, err := s.Session(t0.Add(19*time.Second), "acme", sid(1)); err != nil {
		t.Fatalf("session at its expiry instant: %v", err)
	}
	// One nanosecond later it is gone, without a tick.
	_, err = s.Session(t0.Add(19*time.Second+time.Nanosecond), "acme", sid(1))
	if muster.ErrorCode(err) != muster.CodeSessionNotFound {
		t.Fatalf("after ttl: err = %v, want session_not_found", err)
	}
	if st := s.Stats(); st.Sessions != 0 || st.SessionsExpired != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSessionErrors(t *testing.T) {
	tests := []struct {
		name  string
		owner string
		ttl   time.Duration
		want  muster.Code
	}{
		{"EmptyOwner", "", time.Second, muster.CodeInvalidRequest},
		{"LongOwner", string(make([]byte, MaxOwnerIDLen+1)), time.Second, muster.CodeInvalidRequest},
		{"ShortTTL", "w", MinSessionTTL - time.Millisecond, muster.CodeInvalidRequest},
		{"LongTTL", "w", MaxSessionTTL + time.Millisecond, muster.CodeInvalidRequest},
		{"OwnerESC", "\x1b[2J", time.Second, muster.CodeInvalidRequest},
		{"OwnerNUL", "w\x00", time.Second, muster.CodeInvalidRequest},
		{"OwnerNewline", "w\nforged row", time.Second, muster.CodeInvalidRequest},
		{"OwnerDEL", "w\x7f", time.Second, muster.CodeInvalidRequest},
		{"OwnerC1", "w\u009b", time.Second, muster.CodeInvalidRequest},
		{"OwnerRLO", "w\u202e", time.Second, muster.CodeInvalidRequest},
		{"OwnerLRI", "w\u2066", time.Second, muster.CodeInvalidRequest},
		{"OwnerRLM", "w\u200f", time.Second, muster.CodeInvalidRequest},
		{"OwnerALM", "w\u061c", time.Second, muster.CodeInvalidRequest},
		{"OwnerInvalidUTF8", "w\xff", time.Second, muster.CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := testState(t)
			_, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: tc.owner, TTL: tc.ttl})
			if got := muster.ErrorCode(err); got != tc.want {
				t.Fatalf("code = %v, want %v", got, tc.want)
			}
			if s.Stats().Sessions != 0 {
				t.Fatal("a refused session left state behind")
			}
		})
	}
}

func TestSessionFamilyIsolation(t *testing.T) {
	s := testState(t)
	if _, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Keepalive(t0, "other", sid(1)); muster.ErrorCode(err) != muster.CodeSessionNotFound {
		t.Fatalf("keepalive from another family: %v", err)
	}
	if err := s.EndSession(t0, "other", sid(1)); muster.ErrorCode(err) != muster.CodeSessionNotFound {
		t.Fatalf("end from another family: %v", err)
	}
	if err := s.EndSession(t0, "acme", sid(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(t0, "acme", sid(1)); muster.ErrorCode(err) != muster.CodeSessionNotFound {
		t.Fatalf("second end: %v", err)
	}
}

func TestSessionLimit(t *testing.T) {
	s := testState(t)
	for i := byte(1); i <= 4; i++ {
		if _, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(i), OwnerID: "w", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(5), OwnerID: "w", TTL: time.Second}); muster.ErrorCode(err) != muster.CodeSessionLimit {
		t.Fatalf("fifth session: %v", err)
	}
	// Expired sessions free their slots before the limit is checked.
	if _, err := s.CreateSession(t0.Add(2*time.Second), SessionRequest{Family: "acme", ID: sid(5), OwnerID: "w", TTL: time.Second}); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestIncarnation(t *testing.T) {
	s := testState(t)
	a, _ := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "same-owner", TTL: time.Minute})
	b, _ := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(2), OwnerID: "same-owner", TTL: time.Minute})
	if a.Incarnation == b.Incarnation {
		t.Fatal("two sessions with one owner_id share an incarnation")
	}
	k, _ := s.Keepalive(t0, "acme", sid(1))
	if k.Incarnation != a.Incarnation {
		t.Fatal("incarnation changed on keepalive")
	}
	other := NewState(Config{Epoch: "e2", IncarnationKey: []byte("k2")})
	c, _ := other.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "same-owner", TTL: time.Minute})
	if c.Incarnation == a.Incarnation {
		t.Fatal("the same session id under a new epoch key kept its incarnation")
	}
}

func TestParseSessionID(t *testing.T) {
	id := sid(0xab)
	got, err := ParseSessionID(id.String())
	if err != nil || got != id {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, bad := range []string{"", "00", id.String() + "0", "0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcdeg"} {
		if _, err := ParseSessionID(bad); muster.ErrorCode(err) != muster.CodeInvalidRequest {
			t.Errorf("ParseSessionID(%q) err = %v", bad, err)
		}
	}
}

func TestDeadlinesRekey(t *testing.T) {
	d := newDeadlines[int]()
	d.Set(1, t0.Add(3*time.Second))
	d.Set(2, t0.Add(1*time.Second))
	d.Set(1, t0) // re-key, no duplicate
	if d.Len() != 2 {
		t.Fatalf("len = %d, want 2", d.Len())
	}
	var got []int
	for {
		k, ok := d.PopDue(t0.Add(time.Hour))
		if !ok {
			break
		}
		got = append(got, k)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("order = %v, want [1 2]", got)
	}
}
