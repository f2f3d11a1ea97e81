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
	owner := c.waitOwner("acme", c.brokers, 15*time.Second)
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
