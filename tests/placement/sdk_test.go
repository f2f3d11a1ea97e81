package placement

import (
	"context"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// The Go SDK follows wrong_broker: a client configured with any broker of
// the deployment works against the family's owner, and after the owner's
// kill -9 a new session (the old one ended with the failover) lands on the
// new owner with a higher fencing token.
func TestGoSDKFollowsTheOwner(t *testing.T) {
	c := newCluster(t, 2, "acme")
	owner := c.waitSettled("acme", c.brokers, 15*time.Second)
	other := without(c.brokers, owner)[0]

	cl, err := muster.New(other.url, muster.WithToken(secret("acme")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := cl.NewSession(ctx, "w", 10*time.Second)
	if err != nil {
		t.Fatalf("session through a non-owner: %v", err)
	}
	l, err := s.Acquire(ctx, "lease://r/a/job", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := l.FencingToken()

	owner.kill9(t)
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not reported lost after its broker died")
	}
	var l2 *muster.Lease
	for l2 == nil {
		if ctx.Err() != nil {
			t.Fatal("no new lease after the failover")
		}
		s2, err := cl.NewSession(ctx, "w", 10*time.Second)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		defer s2.Close(context.Background())
		if l2, err = s2.Acquire(ctx, "lease://r/a/job", 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if l2.FencingToken() <= before {
		t.Fatalf("token after failover %d, before %d", l2.FencingToken(), before)
	}
}

// observe starts a Go SDK observer of lease://r/** in family acme,
// configured with broker b; it is closed when the test ends.
func observe(ctx context.Context, t *testing.T, b *broker) *muster.Observer {
	t.Helper()
	cl, err := muster.New(b.url, muster.WithToken(secret("acme")))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := cl.Observe(ctx, "lease://r/**", muster.WithReconcileInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = obs.Close() })
	return obs
}

func has(v muster.View, route string) bool {
	for _, it := range v.Items {
		if it.Route == route {
			return true
		}
	}
	return false
}

// waitView waits until the observer is ready with a view that ok accepts.
func waitView(ctx context.Context, t *testing.T, obs *muster.Observer, ok func(muster.View) bool) muster.View {
	t.Helper()
	for {
		if v := obs.View(); v.Ready && ok(v) {
			return v
		}
		select {
		case <-obs.Changed():
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("the observer never showed the expected view; last %+v", obs.View())
		}
	}
}
