package muster

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A worker takes its share in one request, renews it in one request and
// returns it in one request; each result is what the single operation
// would have answered, and the handles behave as Acquire's.
func TestBatchLifecycle(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	s := mustSession(t, c, "worker-1", 10*time.Second)
	other := mustSession(t, c, "worker-2", 10*time.Second)
	taken, err := other.Acquire(ctx, "lease://acme/r/taken", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Acquire(ctx, "lease://acme/r/held", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	bt := s.Batch()
	for i := range 5 {
		bt.Acquire(fmt.Sprintf("lease://acme/r/d%d", i), 5*time.Second)
	}
	bt.Acquire("lease://acme/r/taken", 5*time.Second).Acquire("lease://acme/r/held", 5*time.Second)
	res, err := bt.Do(ctx)
	if err != nil || len(res) != 7 || bt.Len() != 7 {
		t.Fatalf("do: %d results, %v", len(res), err)
	}
	var mine []*Lease
	for i, r := range res[:5] {
		if r.Err != nil || r.Op != "acquire" || r.Route != fmt.Sprintf("lease://acme/r/d%d", i) || r.Lease == nil || r.Lease.FencingToken() <= 0 {
			t.Fatalf("result %d = %+v", i, r)
		}
		mine = append(mine, r.Lease)
	}
	if !errors.Is(res[5].Err, ErrLeaseHeld) || Advice(res[5].Err) != RetryBackoff || res[5].Lease != nil {
		t.Fatalf("taken: %+v", res[5])
	}
	var e *Error
	if !errors.As(res[5].Err, &e) || e.Status != 409 || e.Detail == "" {
		t.Fatalf("taken err: %#v", res[5].Err)
	}
	if res[6].Err != nil || res[6].Lease != held {
		t.Fatalf("already held: got %p %v, want the same handle %p", res[6].Lease, res[6].Err, held)
	}
	st, err := c.Get(ctx, "lease://acme/r/d3")
	if err != nil || !st.Held || st.Item.OwnerID != "worker-1" {
		t.Fatalf("get: %+v %v", st, err)
	}

	t.Run("Extend", func(t *testing.T) {
		bt := s.Batch()
		for _, l := range mine {
			bt.Extend(l, 8*time.Second)
		}
		res, err := bt.Do(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Lease != mine[i] || mine[i].Renewals() != 1 {
				t.Fatalf("extend %d = %+v, renewals %d", i, r, mine[i].Renewals())
			}
		}
	})
	t.Run("FencedExtendLosesTheLease", func(t *testing.T) {
		// A handle of the same route with a token that is not the current one.
		stale := &Lease{s: s, r: held.r, token: held.token + 1000, lost: make(chan struct{})}
		res, err := s.Batch().Extend(stale, time.Second).Extend(held, 5*time.Second).Do(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, ErrLeaseLost) || !errors.Is(res[0].Err, ErrFenced) {
			t.Fatalf("stale extend: %v", res[0].Err)
		}
		<-stale.Lost()
		if res[1].Err != nil || held.Err() != nil {
			t.Fatalf("current extend: %v / %v", res[1].Err, held.Err())
		}
	})
	t.Run("OtherSessionReleasesItsOwn", func(t *testing.T) {
		res, err := other.Batch().Release(taken).Do(ctx)
		if err != nil || res[0].Err != nil || !errors.Is(taken.Err(), ErrReleased) {
			t.Fatalf("release: %v %+v %v", err, res, taken.Err())
		}
	})
	t.Run("Release", func(t *testing.T) {
		bt := s.Batch()
		for _, l := range mine {
			bt.Release(l)
		}
		bt.Release(mine[0]) // twice: the second is settled locally
		res, err := bt.Do(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Op != "release" {
				t.Fatalf("release %d = %+v", i, r)
			}
		}
		for _, l := range mine {
			<-l.Lost()
			if !errors.Is(l.Err(), ErrReleased) {
				t.Fatalf("released lease err %v", l.Err())
			}
		}
		if st, _ := c.Get(ctx, "lease://acme/r/d0"); st.Held {
			t.Fatal("d0 still held")
		}
	})
}

// Bad batches are refused before anything is sent, with the codes the
// broker would use; the broker refuses the rest as a whole.
func TestBatchRefused(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	s := mustSession(t, c, "worker-1", 10*time.Second)
	other := mustSession(t, c, "worker-2", 10*time.Second)
	theirs, err := other.Acquire(ctx, "lease://acme/r/theirs", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tooMany := s.Batch()
	for i := range MaxBatchOps + 1 {
		tooMany.Acquire(fmt.Sprintf("lease://acme/r/x%d", i), time.Second)
	}
	for _, c := range []struct {
		name string
		b    *Batch
		want error
	}{
		{"Empty", s.Batch(), ErrInvalidRequest},
		{"TooMany", tooMany, ErrInvalidRequest},
		{"BadRoute", s.Batch().Acquire("lease://acme/r/x", time.Second).Acquire("lease://acme/*/x", time.Second), ErrInvalidRoute},
		{"OtherSessionsLease", s.Batch().Release(theirs), ErrInvalidRequest},
		{"TTLOutOfRange", s.Batch().Acquire("lease://acme/r/x", time.Hour), ErrInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := c.b.Do(ctx)
			if !errors.Is(err, c.want) || res != nil {
				t.Fatalf("got %v %v, want %v", res, err, c.want)
			}
		})
	}
	if st, _ := c.Get(ctx, "lease://acme/r/x"); st.Held {
		t.Fatal("a refused batch acquired")
	}
	// A lease of a session that ended is lost, as with Extend.
	l, err := s.Acquire(ctx, "lease://acme/r/mine", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Raw().DeleteSession(ctx, s.ID())
	if err := c.call(resp, err, 204, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch().Extend(l, time.Second).Do(ctx); !errors.Is(err, ErrSessionNotFound) && !errors.Is(err, ErrSessionLost) {
		t.Fatalf("batch on an ended session: %v", err)
	}
	<-l.Lost()
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Fatalf("lease err %v", l.Err())
	}
	// Families are separate universes: the route held in fam-a is free in fam-b.
	sb := mustSession(t, newClient(t, b.url(), "b"), "worker-b", 10*time.Second)
	res, err := sb.Batch().Acquire("lease://acme/r/theirs", time.Second).Do(ctx)
	if err != nil || res[0].Err != nil {
		t.Fatalf("fam-b acquire: %v %+v", err, res)
	}
}

// Authorization is per operation: a route outside the token's grants fails
// alone with ErrForbidden.
func TestBatchForbiddenPerOperation(t *testing.T) {
	b := mustStartBroker(t)
	ctx := ctxT(t, 20*time.Second)
	narrow := newClient(t, b.url(), "narrow") // read-only on lease://acme/renderers/*
	s := mustSession(t, narrow, "reader", 10*time.Second)
	res, err := s.Batch().Acquire("lease://acme/renderers/a", time.Second).Acquire("lease://acme/other/a", time.Second).Do(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if !errors.Is(r.Err, ErrForbidden) || Advice(r.Err) != RetryNo {
			t.Fatalf("result %d: %v", i, r.Err)
		}
	}
}
