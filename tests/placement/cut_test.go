package placement

import (
	"net/http"
	"testing"
	"time"
)

// A broker cut off from PostgreSQL stops serving its family at its
// deadline, and another broker takes it over; a client that knows only the
// cut broker is sent on to a peer (421 naming it) once the cut broker has
// not read the claims for claim_ttl + margin. It used to answer
// family_unavailable for the whole cut, stranding the client until the
// heal.
func TestCutBrokerSendsClientsToAPeer(t *testing.T) {
	c := newCluster(t, 2, "acme")
	cut := c.waitSettled("acme", c.brokers, 15*time.Second)
	peer := without(c.brokers, cut)[0]
	start := time.Now()
	cut.proxy.Cut()
	defer cut.proxy.Heal()
	var stopped time.Time // the cut broker's first refusal
	unavailable := 0
	for {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the client of the cut broker was not sent to a peer within 20 s (%d family_unavailable answers)", unavailable)
		}
		a, err := call(cut.url, "acme", "POST", "/v1/sessions", map[string]any{"owner_id": "w", "ttl_ms": 10000})
		if err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusCreated && stopped.IsZero() {
			stopped = time.Now()
		}
		if a.status == http.StatusServiceUnavailable {
			unavailable++
		}
		if a.status == http.StatusMisdirectedRequest {
			if a.body["owner"] != peer.url {
				t.Fatalf("the cut broker named %v, its peer is %s", a.body["owner"], peer.url)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sent := time.Since(start)
	// The peer knows the owner: itself, once it has taken the family over.
	o := c.waitOwner("acme", []*broker{peer}, 10*time.Second)
	t.Logf("cut at 0; the cut broker stopped serving at %v, answered family_unavailable %d times, sent its client to %s at %v",
		stopped.Sub(start).Round(time.Millisecond), unavailable, o.id, sent.Round(time.Millisecond))
	if bound := c.timing.ttl + c.timing.margin + c.timing.every + 2*time.Second; sent > bound {
		t.Fatalf("sent on after %v: want within claim_ttl + margin + renew_every of the last read (%v)", sent, bound)
	}
}
