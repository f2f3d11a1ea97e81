package core

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/musterhq/muster"
)

// endSink records the terminal event of one stream.
type endSink struct {
	mu     sync.Mutex
	reason StreamEndReason
	rev    Revision
}

func (k *endSink) Change(*Change, string) bool { return true }
func (k *endSink) End(r StreamEndReason, rev Revision) {
	k.mu.Lock()
	k.reason, k.rev = r, rev
	k.mu.Unlock()
}

func placedBroker(t *testing.T, sink func([]Event)) *Broker {
	t.Helper()
	b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k"), Placed: true}, SystemClock{}, sink)
	t.Cleanup(b.Close)
	return b
}

func TestPlacementOffInTheDefaultCore(t *testing.T) {
	b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, nil, nil)
	defer b.Close()
	wantCode(t, b.Serve(context.Background(), "acme", 1, time.Now().Add(time.Hour)), muster.CodeInternal)
	if _, err := b.CreateSession(context.Background(), SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatalf("an unplaced core serves every family: %v", err)
	}
}

func TestPlacedCoreServesOnlyWhatItHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := placedBroker(t, nil)
		ctx := context.Background()
		r := mustRoute(t, "lease://a/b/c")
		_, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute})
		wantCode(t, err, muster.CodeWrongBroker)
		_, err = b.Query(ctx, "acme", r)
		wantCode(t, err, muster.CodeWrongBroker)
		_, err = b.OpenSnapshot(ctx, "acme", "c")
		wantCode(t, err, muster.CodeWrongBroker)
		_, err = b.HeldView(ctx, "acme")
		wantCode(t, err, muster.CodeWrongBroker)

		wantCode(t, b.Serve(ctx, "acme", 0, time.Now().Add(time.Minute)), muster.CodeInvalidRequest)
		wantCode(t, b.Serve(ctx, "acme", MaxPlacementEpoch+1, time.Now().Add(time.Minute)), muster.CodeInvalidRequest)
		if err := b.Serve(ctx, "acme", 1, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		_, err = b.CreateSession(ctx, SessionRequest{Family: "other", ID: sid(2), OwnerID: "w", TTL: time.Minute})
		wantCode(t, err, muster.CodeWrongBroker)
		h, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if want := FencingToken(1)<<EpochShift + 1; h.Token != want {
			t.Fatalf("first token of epoch 1 = %d, want %d", h.Token, want)
		}
		sn, err := b.OpenSnapshot(ctx, "acme", "c")
		if err != nil || sn.Revision != 1<<EpochShift+1 {
			t.Fatalf("snapshot revision %d (%v), want epoch 1, change 1", sn.Revision, err)
		}
	})
}

// At the deadline the family is refused and dropped in one step: leases end
// (session_closed events), waiters are answered, streams end as shutdown.
// One nanosecond before it, everything still works.
func TestDeadlineDropsTheFamily(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []Event
		b := placedBroker(t, func(ev []Event) {
			mu.Lock()
			events = append(events, ev...)
			mu.Unlock()
		})
		ctx := context.Background()
		r := mustRoute(t, "lease://a/b/c")
		until := time.Now().Add(2 * time.Second)
		if err := b.Serve(ctx, "acme", 7, until); err != nil {
			t.Fatal(err)
		}
		for i := byte(1); i <= 2; i++ {
			if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(i), OwnerID: "w", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		h, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() {
			_, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(2), Route: r, TTL: time.Minute, Wait: 30 * time.Second})
			waited <- err
		}()
		sink := &endSink{}
		if _, err := b.Watch(ctx, WatchRequest{SubscribeRequest: SubscribeRequest{Family: "acme", Anon: sid(9), Selectors: []Selector{mustSel(t, "lease://**")},
			Caller: "c"}, Sink: sink, Start: func(WatchStart) {}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		time.Sleep(time.Until(until) - time.Nanosecond)
		if _, err := b.Extend(ctx, ExtendRequest{Family: "acme", Session: sid(1), Route: r, Token: h.Token, TTL: time.Minute}); err != nil {
			t.Fatalf("one nanosecond before the deadline: %v", err)
		}
		time.Sleep(time.Nanosecond)
		_, err = b.Extend(ctx, ExtendRequest{Family: "acme", Session: sid(1), Route: r, Token: h.Token, TTL: time.Minute})
		wantCode(t, err, muster.CodeWrongBroker)
		wantCode(t, <-waited, muster.CodeWrongBroker)
		synctest.Wait()

		st, _ := b.Stats(ctx)
		if st.Sessions != 0 || st.Leases != 0 || st.Waiters != 0 || st.Streams != 0 || st.Snapshots != 0 || st.FamiliesDropped != 1 {
			t.Fatalf("after the deadline: %+v", st)
		}
		sink.mu.Lock()
		if sink.reason != EndShutdown || sink.rev != 7<<EpochShift+3 {
			t.Errorf("stream end = %v at %d, want shutdown at epoch 7 change 3", sink.reason, sink.rev)
		}
		sink.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		last := events[len(events)-1]
		if last.Kind != SessionClosed || last.Revision != 7<<EpochShift+3 {
			t.Fatalf("last event %+v, want session_closed at epoch 7 change 3", last)
		}
		// The same epoch is never served again here, even by a late renewal.
		wantCode(t, b.Serve(ctx, "acme", 7, time.Now().Add(time.Minute)), muster.CodeInvalidRequest)
	})
}

// A takeover's tokens start above anything the previous holder issued, and
// the new holder's universe starts empty.
func TestTokensRiseAcrossTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := mustRoute(t, "lease://a/b/c")
		a, b := placedBroker(t, nil), placedBroker(t, nil)
		if err := a.Serve(ctx, "acme", 1, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		var maxA FencingToken
		for range 50 {
			h, err := a.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: r, TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			maxA = max(maxA, h.Token)
			if err := a.Release(ctx, ReleaseRequest{Family: "acme", Session: sid(1), Route: r, Token: h.Token}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		if err := b.Serve(ctx, "acme", 2, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err := b.Query(ctx, "acme", r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(2), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		h, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(2), Route: r, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if h.Token <= maxA || h.Token != 2<<EpochShift+1 {
			t.Fatalf("takeover token %d, previous holder issued up to %d", h.Token, maxA)
		}
		// The old holder refuses the session it had: it serves nothing now.
		_, err = a.Keepalive(ctx, "acme", sid(1))
		wantCode(t, err, muster.CodeWrongBroker)
	})
}

// A rebase keeps the family's state and tokens; later values start at the
// new epoch.
func TestRebaseKeepsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := placedBroker(t, nil)
		r1, r2 := mustRoute(t, "lease://a/b/c"), mustRoute(t, "lease://a/b/d")
		if err := b.Serve(ctx, "acme", 3, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		h1, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: r1, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Serve(ctx, "acme", 4, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		wantCode(t, b.Serve(ctx, "acme", 3, time.Now().Add(time.Minute)), muster.CodeInvalidRequest)
		if _, err := b.Extend(ctx, ExtendRequest{Family: "acme", Session: sid(1), Route: r1, Token: h1.Token, TTL: time.Minute}); err != nil {
			t.Fatalf("extend with the token from before the rebase: %v", err)
		}
		h2, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: r2, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if h2.Token != 4<<EpochShift+2 || h2.Token <= h1.Token {
			t.Fatalf("token after rebase %d (before %d)", h2.Token, h1.Token)
		}
		p, _ := b.Placement(ctx, "acme")
		if !p.Serving || p.Epoch != 4 || p.Changes != 2 {
			t.Fatalf("placement %+v", p)
		}
	})
}

// A planned move drops the family at once.
func TestUnserveDropsAtOnce(t *testing.T) {
	ctx := context.Background()
	b := placedBroker(t, nil)
	if err := b.Serve(ctx, "acme", 1, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := b.Unserve(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, err := b.Keepalive(ctx, "acme", sid(1))
	wantCode(t, err, muster.CodeWrongBroker)
	if p, _ := b.Placement(ctx, "acme"); p.Serving {
		t.Fatalf("still serving: %+v", p)
	}
}

// A family whose change count nears 2^32 without a rebase is dropped rather
// than let its values reach the next epoch's.
func TestChangeLimitDropsTheFamily(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k"), Placed: true})
	if err := s.Serve(now, "acme", 1, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	s.families["acme"].place.changes = familyChangesLimit - 1
	if err := s.gate(now, "acme"); err != nil {
		t.Fatal(err)
	}
	h, _, err := s.Acquire(now, AcquireRequest{Family: "acme", Session: sid(1), Route: mustRoute(t, "lease://a/b/c"), TTL: time.Second})
	if err != nil || h.Token != 1<<EpochShift+familyChangesLimit {
		t.Fatalf("acquire: %d %v", h.Token, err)
	}
	wantCode(t, s.gate(now, "acme"), muster.CodeWrongBroker)
	if len(s.sessions) != 0 {
		t.Fatalf("sessions left after the drop: %d", len(s.sessions))
	}
	if 2<<EpochShift <= uint64(1)<<EpochShift+familyChangesLimit {
		t.Fatal("the limit leaves no room below the next epoch")
	}
}

// A batch answers the family's revision, as every other read of a placed
// family does: at or above the tokens it just granted, equal to a lookup's.
func TestPlacedBatchAnswersTheFamilyRevision(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k"), Placed: true})
	if err := s.Serve(now, "acme", 3, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ans, err := s.Batch(now, BatchRequest{Family: "acme", Session: sid(1), Ops: []BatchOp{
		{Kind: BatchAcquire, Route: rA, TTL: time.Minute},
		{Kind: BatchAcquire, Route: rB, TTL: time.Minute},
	}})
	if err != nil || ans.Results[0].Err != nil || ans.Results[1].Err != nil {
		t.Fatal(err, ans.Results)
	}
	want := Revision(3<<EpochShift + 2)
	if got := Revision(ans.Results[1].Holding.Token); got != want {
		t.Fatalf("second grant's token %d, want %d", got, want)
	}
	if ans.Revision != want || s.Lookup(now, "acme", rA).Revision != want {
		t.Fatalf("batch revision %d, lookup revision %d, want %d", ans.Revision, s.Lookup(now, "acme", rA).Revision, want)
	}
}
