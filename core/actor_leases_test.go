package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

func newTestBroker(t *testing.T, sink func([]Event)) *Broker {
	t.Helper()
	b := NewBroker(Config{Epoch: "e", IncarnationKey: []byte("k")}, SystemClock{}, sink)
	t.Cleanup(b.Close)
	return b
}

// A grant produced in the same actor step in which its requester's context
// ends cannot be handed over: it is rolled back, and the next waiter is
// considered. Both select branches of Acquire lead there.
func TestBrokerRollsBackUndeliverableGrant(t *testing.T) {
	for round := 0; round < 50; round++ {
		var kinds []ChangeKind
		b := newTestBroker(t, func(ev []Event) {
			for _, e := range ev {
				kinds = append(kinds, e.Kind)
			}
		})
		ctx := context.Background()
		b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "a", TTL: time.Minute})
		b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(2), OwnerID: "w", TTL: time.Minute})
		h, err := b.Acquire(ctx, AcquireRequest{Family: "acme", Session: sid(1), Route: rA, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := b.Acquire(wctx, AcquireRequest{Family: "acme", Session: sid(2), Route: rA, TTL: time.Minute, Wait: 20 * time.Second})
			done <- err
		}()
		for {
			st, _ := b.Query(ctx, "acme", rA)
			if st.Waiters == 1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		// Cancel the waiter and release in ONE actor step.
		call(ctx, b, func(s *State, now time.Time) (struct{}, error) {
			cancel()
			return struct{}{}, s.Release(now, ReleaseRequest{Family: "acme", Session: sid(1), Route: rA, Token: h.Token})
		})
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: waiter err = %v", round, err)
		}
		st, _ := b.Query(ctx, "acme", rA)
		if st.Item != nil {
			t.Fatalf("round %d: the undeliverable grant was kept: %+v", round, st.Item)
		}
		want := []ChangeKind{Acquired, Released, Acquired, RolledBack}
		if len(kinds) != len(want) {
			t.Fatalf("round %d: events %v, want %v", round, kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Fatalf("round %d: events %v, want %v", round, kinds, want)
			}
		}
		b.Close()
	}
}

// An already_held answer is never rolled back: nothing was granted.
func TestBrokerNoRollbackOfAlreadyHeld(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := context.Background()
	b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "a", TTL: time.Minute})
	req := AcquireRequest{Family: "acme", Session: sid(1), Route: rA, TTL: time.Minute}
	if _, err := b.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	// The command may or may not be enqueued; either way the lease stays.
	b.Acquire(cctx, req)
	if st, _ := b.Query(ctx, "acme", rA); st.Item == nil {
		t.Fatal("a repeated acquire by the holder released its lease")
	}
}
