package core

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

func placedState(t *testing.T, key string) *State {
	t.Helper()
	return NewState(Config{Epoch: "e", IncarnationKey: []byte(key), Placed: true})
}

var testSalt = []byte("0123456789abcdef")

// movedFamily serves acme at epoch 3 on a, with session 1 holding two
// leases, session 2 waiting for one of them, and exports it.
func movedFamily(t *testing.T, now time.Time) (a *State, h Handover, held Holding) {
	t.Helper()
	a = placedState(t, "ka")
	if err := a.Serve(now, "acme", 3, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i, ttl := range []time.Duration{time.Minute, 30 * time.Second} {
		if _, err := a.CreateSession(now, SessionRequest{Family: "acme", ID: sid(byte(i + 1)), OwnerID: "w", TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRoute(t, "lease://a/b/c")
	held, _, err := a.Acquire(now, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Acquire(now, AcquireRequest{Family: "acme", Session: sid(1), Route: mustRoute(t, "lease://a/b/d"), TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, ticket, err := a.Acquire(now, AcquireRequest{Family: "acme", Session: sid(2), Route: r, TTL: time.Second, Wait: 10 * time.Second}); err != nil || ticket == 0 {
		t.Fatalf("the second session waits: ticket %d, %v", ticket, err)
	}
	a.TakeEvents()
	h, err = a.Export(now.Add(time.Second), "acme", testSalt)
	if err != nil {
		t.Fatal(err)
	}
	return a, h, held
}

func TestExportStopsServingAndAnswersWaiters(t *testing.T) {
	now := time.Unix(1000, 0)
	a, h, _ := movedFamily(t, now)
	if len(a.TakeEvents()) != 0 {
		t.Fatal("a move released a lease: no event may come of it")
	}
	res := a.TakeResults()
	if len(res) != 1 || muster.ErrorCode(res[0].Err) != muster.CodeWrongBroker {
		t.Fatalf("the waiter is answered wrong_broker: %+v", res)
	}
	if len(h.Sessions) != 2 || h.Epoch != 3 {
		t.Fatalf("handover: %+v", h)
	}
	for _, hs := range h.Sessions {
		id1, id2 := sid(1), sid(2)
		if string(hs.Key) == string(id1[:]) || string(hs.Key) == string(id2[:]) {
			t.Fatal("a session id travels in the clear")
		}
	}
	wantCode(t, a.gate(now.Add(time.Second), "acme"), muster.CodeWrongBroker)
	if st := a.Stats(); st.Sessions != 0 || st.Leases != 0 || st.Waiters != 0 {
		t.Fatalf("the exporter keeps state: %+v", st)
	}
}

func TestImportKeepsSessionsLeasesAndTokens(t *testing.T) {
	now := time.Unix(1000, 0)
	_, h, held := movedFamily(t, now)
	h = roundTrip(t, h)
	b := placedState(t, "kb")
	later := now.Add(1500 * time.Millisecond) // 0.5 s in transit
	if err := b.Import(later, "acme", 4, later.Add(time.Hour), h, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	r := mustRoute(t, "lease://a/b/c")
	st := b.Query(later, "acme", r)
	if st.Item == nil || st.Item.HolderIncarnation() != held.Item.HolderIncarnation() {
		t.Fatalf("the lease lives on with its holder: %+v", st)
	}
	if got, want := st.Item.ExpiresAt(), now.Add(20*time.Second); !got.Equal(want) {
		t.Fatalf("the lease expires at %v, want %v: transit is charged, never added", got, want)
	}
	// The session answers to its real id, with its expiry charged too.
	info, err := b.Session(later, "acme", sid(1))
	if err != nil || !info.ExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("session: %+v, %v", info, err)
	}
	if _, err := b.Extend(later, ExtendRequest{Family: "acme", Session: sid(1), Route: r, Token: held.Token, TTL: time.Minute}); err != nil {
		t.Fatalf("the old token extends at the new owner: %v", err)
	}
	// New grants are fenced above everything the old owner issued.
	g, _, err := b.Acquire(later, AcquireRequest{Family: "acme", Session: sid(2), Route: mustRoute(t, "lease://a/b/e"), TTL: time.Second})
	if err != nil || g.Token <= held.Token || g.Token>>EpochShift != 4 {
		t.Fatalf("a new grant's token %d, the moved one %d: %v", g.Token, held.Token, err)
	}
	_, _, err = b.Acquire(later, AcquireRequest{Family: "acme", Session: sid(2), Route: r, TTL: time.Second})
	wantCode(t, err, muster.CodeLeaseHeld)
	if b.Stats().SessionsPromoted != 2 {
		t.Fatalf("promoted: %d", b.Stats().SessionsPromoted)
	}
}

func TestPendingSessionAnswersOnlyToItsId(t *testing.T) {
	now := time.Unix(1000, 0)
	_, h, _ := movedFamily(t, now)
	b := placedState(t, "kb")
	if err := b.Import(now, "acme", 4, now.Add(time.Hour), h, 0); err != nil {
		t.Fatal(err)
	}
	var pseudo SessionID
	copy(pseudo[:], h.Sessions[0].Key)
	_, err := b.Session(now, "acme", pseudo)
	wantCode(t, err, muster.CodeSessionNotFound)
	_, err = b.Session(now, "other", sid(1))
	wantCode(t, err, muster.CodeSessionNotFound)
	// Moved on again before its client came: it travels under its old key.
	h2, err := b.Export(now, "acme", []byte("fedcba9876543210"))
	if err != nil {
		t.Fatal(err)
	}
	c := placedState(t, "kc")
	if err := c.Import(now, "acme", 5, now.Add(time.Hour), h2, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keepalive(now, "acme", sid(1)); err != nil {
		t.Fatalf("two moves later: %v", err)
	}
}

func TestImportDropsWhatRanOutInTransit(t *testing.T) {
	now := time.Unix(1000, 0)
	_, h, _ := movedFamily(t, now)
	b := placedState(t, "kb")
	// 15 s in transit: the 10 s lease is gone, the 20 s one has 4 s left
	// (it was exported 1 s after its grant).
	if err := b.Import(now, "acme", 4, now.Add(time.Hour), h, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Leases != 1 || st.Sessions != 2 {
		t.Fatalf("after a long transit: %+v", st)
	}
	if err := b.Import(now, "beta", 4, now.Add(time.Hour), h, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Leases != 1 || st.Sessions != 2 {
		t.Fatalf("everything ran out: %+v", st)
	}
}

func TestImportRefusesMalformedHandovers(t *testing.T) {
	now := time.Unix(1000, 0)
	_, good, _ := movedFamily(t, now)
	// Export lists sessions in map order; the cases below spoil the leases
	// of the first, so it must be the one that holds two.
	slices.SortFunc(good.Sessions, func(a, b HandoverSession) int { return len(b.Leases) - len(a.Leases) })
	cases := map[string]func(h *Handover){
		"epoch not below":   func(h *Handover) { h.Epoch = 4 },
		"short key":         func(h *Handover) { h.Sessions[0].Key = h.Sessions[0].Key[:8] },
		"owner":             func(h *Handover) { h.Sessions[0].OwnerID = "a\x00b" },
		"ttl":               func(h *Handover) { h.Sessions[0].TTL = time.Hour },
		"left above ttl":    func(h *Handover) { h.Sessions[0].Left = 2 * h.Sessions[0].TTL },
		"twice":             func(h *Handover) { h.Sessions[1] = h.Sessions[0] },
		"route":             func(h *Handover) { h.Sessions[0].Leases[0].Key = "a/*/c" },
		"route held twice":  func(h *Handover) { h.Sessions[0].Leases[1].Key = h.Sessions[0].Leases[0].Key },
		"token of a future": func(h *Handover) { h.Sessions[0].Leases[0].Token = FencingToken(4 << EpochShift) },
		"no incarnation":    func(h *Handover) { h.Sessions[0].Incarnation = "" },
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			h := roundTrip(t, good)
			spoil(&h)
			b := placedState(t, "kb")
			wantCode(t, b.Import(now, "acme", 4, now.Add(time.Hour), h, 0), muster.CodeInvalidRequest)
			if pl := b.Placement(now, "acme"); pl.Serving {
				t.Fatal("a refused handover left the family served")
			}
			if st := b.Stats(); st.Sessions != 0 || st.Leases != 0 {
				t.Fatalf("a refused handover left state: %+v", st)
			}
		})
	}
}

// roundTrip is h as the next owner reads it from the claim store.
func roundTrip(t testing.TB, h Handover) Handover {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out Handover
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzImportHandover: whatever the claim store hands back, Import either
// refuses it and changes nothing, or loads it into a state that works.
func FuzzImportHandover(f *testing.F) {
	now := time.Unix(1000, 0)
	_, good, _ := movedFamily(&testing.T{}, now)
	b, _ := json.Marshal(good)
	f.Add(b)
	f.Add([]byte(`{"epoch":1,"sessions":[{"salt":"MDEyMzQ1Njc4OWFiY2RlZg==","key":"","leases":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Handover
		if json.Unmarshal(data, &h) != nil {
			return
		}
		s := placedState(t, "kb")
		err := s.Import(now, "acme", MaxPlacementEpoch, now.Add(time.Hour), h, 0)
		st := s.Stats()
		if err != nil {
			if st.Sessions != 0 || st.Leases != 0 || s.Placement(now, "acme").Serving {
				t.Fatalf("refused but changed: %+v", st)
			}
			return
		}
		s.Tick(now.Add(11 * time.Minute)) // everything expires cleanly
		if st := s.Stats(); st.Sessions != 0 || st.Leases != 0 {
			t.Fatalf("left after every TTL: %+v", st)
		}
	})
}
