package claims_test

import (
	"testing"
	"time"

	"github.com/musterhq/muster/tests/pgtest"
)

// A handover goes with the release to the next acquisition only, aged by
// the server's clock, whoever acquires; a plain release or a later epoch
// carries nothing.
func TestHandoverGoesToTheNextAcquisitionOnly(t *testing.T) {
	u := pgtest.Schema(t, "claims")
	a := mustOpen(t, u, "a", 5*time.Second, time.Second)
	b := mustOpen(t, u, "b", 5*time.Second, time.Second)
	c := mustOpen(t, u, "c", 5*time.Second, time.Second)

	ca, err := a.Acquire(ctx(t), "acme")
	if err != nil || ca.Handover != nil {
		t.Fatalf("first acquisition: %+v %v", ca, err)
	}
	ok, err := a.Handover(ctx(t), ca, "b", []byte("state-1"), 200*time.Millisecond)
	if err != nil || !ok {
		t.Fatalf("handover: %v %v", ok, err)
	}
	owners, err := c.Owners(ctx(t))
	if o := owners["acme"]; err != nil || o.Live || !o.Released || o.HandoverTo != "b" {
		t.Fatalf("after the handover the table says %+v (%v)", o, err)
	}
	if ok, err := a.Handover(ctx(t), ca, "b", []byte("again"), 0); err != nil || ok {
		t.Fatalf("a second handover of the same claim: %v %v, want nothing written", ok, err)
	}
	time.Sleep(100 * time.Millisecond)
	cc, err := c.Acquire(ctx(t), "acme") // not the broker it was meant for: it still gets the state
	if err != nil || cc.Handover == nil || string(cc.Handover.State) != "state-1" {
		t.Fatalf("acquisition after the handover: %+v %v", cc, err)
	}
	if age := cc.Handover.Age; age < 300*time.Millisecond || age > 5*time.Second {
		t.Fatalf("handover age %v: want the 200 ms before the write plus the 100 ms after it", age)
	}
	// c gives it up without a handover: the next owner starts empty.
	if err := c.Release(ctx(t), cc); err != nil {
		t.Fatal(err)
	}
	cb, err := b.Acquire(ctx(t), "acme")
	if err != nil || cb.Handover != nil {
		t.Fatalf("after a plain release: %+v %v", cb, err)
	}
	// A handover left for an acquisition that crashed is not handed on.
	if ok, err := b.Handover(ctx(t), cb, "a", []byte("state-3"), 0); err != nil || !ok {
		t.Fatalf("handover: %v %v", ok, err)
	}
	ca2, err := a.Acquire(ctx(t), "acme")
	if err != nil || ca2.Handover == nil {
		t.Fatalf("%+v %v", ca2, err)
	}
	time.Sleep(5*time.Second + 1100*time.Millisecond) // a crashes: its claim expires, then its margin passes
	cc2, err := c.Acquire(ctx(t), "acme")
	if err != nil || cc2.Handover != nil {
		t.Fatalf("a failover took an old handover: %+v %v", cc2, err)
	}
}
