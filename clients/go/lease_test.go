package muster

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseLifecycle(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	s := mustSession(t, c, "worker-1", 10*time.Second)
	other := mustSession(t, c, "worker-2", 10*time.Second)

	l, err := s.Acquire(ctx, "lease://acme/renderers/doc-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Route() != "lease://acme/renderers/doc-1" || l.FencingToken() <= 0 {
		t.Fatalf("lease: %s %d", l.Route(), l.FencingToken())
	}
	t.Run("AlreadyHeldIsTheSameHandle", func(t *testing.T) {
		again, err := s.Acquire(ctx, l.Route(), 5*time.Second)
		if err != nil || again != l {
			t.Fatalf("got %p %v, want the same handle %p", again, err, l)
		}
	})
	t.Run("ErrLeaseHeld", func(t *testing.T) {
		_, err := other.Acquire(ctx, l.Route(), time.Second)
		if !errors.Is(err, ErrLeaseHeld) || Advice(err) != RetryBackoff {
			t.Fatalf("got %v (%v), want lease_held", err, Advice(err))
		}
	})
	t.Run("ErrWaitTimeout", func(t *testing.T) {
		_, err := other.Acquire(ctx, l.Route(), time.Second, Wait(200*time.Millisecond))
		if !errors.Is(err, ErrWaitTimeout) {
			t.Fatalf("got %v, want wait_timeout", err)
		}
	})
	t.Run("Extend", func(t *testing.T) {
		before := l.Renewals()
		if err := l.Extend(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if l.Renewals() != before+1 {
			t.Fatalf("renewals %d, want %d", l.Renewals(), before+1)
		}
		st, err := c.Get(ctx, l.Route())
		if err != nil || !st.Held || st.Item.OwnerID != "worker-1" || st.Item.HolderIncarnation != s.HolderIncarnation() {
			t.Fatalf("get: %+v %v", st, err)
		}
	})
	t.Run("WaiterGetsItOnRelease", func(t *testing.T) {
		got := make(chan *Lease, 1)
		go func() {
			l2, err := other.Acquire(ctx, l.Route(), 5*time.Second, Wait(5*time.Second))
			if err != nil {
				t.Error(err)
			}
			got <- l2
		}()
		time.Sleep(200 * time.Millisecond)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(l.Err(), ErrReleased) {
			t.Fatalf("err after release: %v", l.Err())
		}
		select {
		case <-l.Lost():
		default:
			t.Fatal("Lost not closed after Release")
		}
		l2 := <-got
		if l2 == nil || l2.FencingToken() <= l.FencingToken() {
			t.Fatalf("waiter's token %v, want > %d", l2, l.FencingToken())
		}
		// The old holder's token is fenced now: extending is refused.
		if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrReleased) {
			t.Fatalf("extend after release: %v", err)
		}
	})
	t.Run("InvalidRoute", func(t *testing.T) {
		for _, r := range []string{"lease://acme/renderers", "notice://a/b/c", "lease://a//c"} {
			if _, err := s.Acquire(ctx, r, time.Second); !errors.Is(err, ErrInvalidRoute) {
				t.Errorf("%s: got %v, want invalid_route", r, err)
			}
		}
		if _, err := s.Acquire(ctx, "lease://acme/*/doc", time.Second); !errors.Is(err, ErrInvalidRoute) {
			t.Errorf("wildcard: got %v, want invalid_route from the broker", err)
		}
	})
}

func TestLeaseLostWhenSessionEnds(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	s := mustSession(t, c, "worker-1", 3*time.Second)
	l, err := s.Acquire(ctx, "lease://acme/renderers/doc-1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Someone with the secret ends the session behind the SDK's back.
	resp, err := c.Raw().DeleteSession(ctx, s.ID())
	if err := c.call(resp, err, 204, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("the keepalive did not notice the session's end")
	}
	<-l.Lost()
	if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(l.Err(), ErrSessionNotFound) || !errors.Is(s.Err(), ErrSessionLost) {
		t.Fatalf("lease err %v, session err %v", l.Err(), s.Err())
	}
	if _, err := s.Acquire(ctx, "lease://acme/renderers/doc-2", time.Second); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("acquire on a lost session: %v", err)
	}
}

func TestLeaseLocalDeadline(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	s := mustSession(t, c, "worker-1", 10*time.Second)
	l, err := s.Acquire(ctx, "lease://acme/renderers/doc-1", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("not lost after its TTL")
	}
	if !errors.Is(l.Err(), ErrLeaseExpired) || !errors.Is(l.Err(), ErrLeaseLost) {
		t.Fatalf("err %v", l.Err())
	}
}

func TestWithLease(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 30*time.Second)

	t.Run("RenewsAndReleases", func(t *testing.T) {
		s := mustSession(t, c, "worker-1", 10*time.Second)
		var token int64
		err := s.WithLease(ctx, "lease://acme/renderers/doc-1", 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
			token = l.FencingToken()
			select {
			case <-time.After(1200 * time.Millisecond): // four TTLs
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Get(ctx, "lease://acme/renderers/doc-1")
		if err != nil || st.Held {
			t.Fatalf("after WithLease: %+v %v (token %d)", st, err, token)
		}
	})
	t.Run("CancelsOnLoss", func(t *testing.T) {
		s := mustSession(t, c, "worker-2", 10*time.Second)
		start := time.Now()
		err := s.WithLease(ctx, "lease://acme/renderers/doc-2", 600*time.Millisecond, func(fctx context.Context, l *Lease) error {
			resp, err := c.Raw().DeleteSession(ctx, s.ID())
			if err := c.call(resp, err, 204, nil); err != nil {
				return err
			}
			<-fctx.Done()
			return context.Cause(fctx)
		})
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("got %v, want the loss", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("loss noticed after %v", d)
		}
	})
	t.Run("AcquireFails", func(t *testing.T) {
		s := mustSession(t, c, "worker-3", 10*time.Second)
		holder := mustSession(t, c, "worker-4", 10*time.Second)
		if _, err := holder.Acquire(ctx, "lease://acme/renderers/doc-3", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		called := false
		err := s.WithLease(ctx, "lease://acme/renderers/doc-3", time.Second, func(context.Context, *Lease) error {
			called = true
			return nil
		})
		if !errors.Is(err, ErrLeaseHeld) || called {
			t.Fatalf("got %v (called %v)", err, called)
		}
	})
}

func TestSessionCloseLosesLeases(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 10*time.Second)
	s, err := c.NewSession(ctx, "worker-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, "lease://acme/renderers/doc-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), ErrClosed) || !errors.Is(s.Err(), ErrClosed) {
		t.Fatalf("lease %v session %v", l.Err(), s.Err())
	}
	st, err := c.Get(ctx, l.Route())
	if err != nil || st.Held {
		t.Fatalf("after close: %+v %v", st, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
