package placement

import (
	"testing"
	"time"
)

// Every lease mutation sent to a broker that does not serve the family is
// answered 421 wrong_broker naming the owner, whichever path the server
// takes for it: the generated handlers (session create), the lease
// mutations' fast path (acquire, extend, release) and the batch endpoint.
func TestEveryMutationNamesTheOwner(t *testing.T) {
	c := newCluster(t, 2, "acme")
	o := c.waitSettled("acme", c.brokers, 20*time.Second)
	other := without(c.brokers, o)[0]
	session, a, err := newSession(o.url, "acme")
	if err != nil || session == "" {
		t.Fatalf("session on the owner: %d %v", a.status, err)
	}
	tok, a, err := acquire(o.url, "acme", session, "held")
	if err != nil || tok == 0 {
		t.Fatalf("acquire on the owner: %d %v %v", a.status, a.body, err)
	}
	for _, req := range []struct {
		name, path string
		body       map[string]any
	}{
		{"session", "/v1/sessions", map[string]any{"owner_id": "w", "ttl_ms": 60000}},
		{"acquire", "/v1/leases/r/a/free/acquire", map[string]any{"session_id": session, "ttl_ms": 30000}},
		{"extend", "/v1/leases/r/a/held/extend", map[string]any{"session_id": session, "ttl_ms": 30000, "fencing_token": tok}},
		{"release", "/v1/leases/r/a/held/release", map[string]any{"session_id": session, "fencing_token": tok}},
		{"batch", "/v1/leases/batch", map[string]any{"session_id": session, "ops": []map[string]any{
			{"op": "acquire", "route": "lease://r/a/free", "ttl_ms": 30000}}}},
	} {
		a, err := call(other.url, "acme", "POST", req.path, req.body)
		if err != nil {
			t.Fatalf("%s on the non-owner: %v", req.name, err)
		}
		if a.status != 421 || a.code() != "wrong_broker" || a.body["owner"] != o.url {
			t.Errorf("%s on the non-owner: %d %v, want 421 wrong_broker with owner %s", req.name, a.status, a.body, o.url)
		}
	}
	// Nothing happened on either broker: the lease is still held with its token.
	if _, a, _ := acquire(o.url, "acme", session, "held"); a.status != 200 || uint64(a.body["fencing_token"].(float64)) != tok {
		t.Fatalf("the held lease changed: %d %v", a.status, a.body)
	}
}

// Every read of the family's inventory sent to a broker that does not serve
// it names the owner too: an exact LIST, a wildcard LIST (which takes a
// snapshot: its refusal must not turn into inventory_unavailable) and a gap
// page.
func TestEveryInventoryReadNamesTheOwner(t *testing.T) {
	c := newCluster(t, 2, "acme")
	o := c.waitSettled("acme", c.brokers, 20*time.Second)
	other := without(c.brokers, o)[0]
	for _, path := range []string{
		"/v1/leases?selector=lease://r/a/x",
		"/v1/leases?selector=lease://r/a/*",
		"/v1/leases?selector=lease://**",
		"/v1/fleets/r/gap?live=lease://r/a/*",
	} {
		a, err := call(other.url, "acme", "GET", path, nil)
		if err != nil {
			t.Fatalf("%s on the non-owner: %v", path, err)
		}
		if a.status != 421 || a.code() != "wrong_broker" || a.body["owner"] != o.url {
			t.Errorf("%s on the non-owner: %d %v, want 421 wrong_broker with owner %s", path, a.status, a.body, o.url)
		}
	}
}

// TestPlacementVisible: every broker answers GET /v1/placement for the
// caller's family: the owner of its live claim, the live brokers, and
// which broker answered (also in Muster-Broker).
func TestPlacementVisible(t *testing.T) {
	c := newCluster(t, 2, "acme")
	owner := c.waitSettled("acme", c.brokers, 15*time.Second)
	for _, b := range c.brokers {
		a, err := call(b.url, "acme", "GET", "/v1/placement", nil)
		if err != nil || a.status != 200 {
			t.Fatalf("placement from %s: %d %v %v", b.id, a.status, a.body, err)
		}
		o, _ := a.body["owner"].(map[string]any)
		brokers, _ := a.body["brokers"].([]any)
		if a.body["family"] != "acme" || a.body["placed"] != true || a.body["broker"] != b.id || a.header.Get("Muster-Broker") != b.id ||
			o["broker"] != owner.id || o["addr"] != owner.url || o["epoch"].(float64) < 1 || len(brokers) != 2 {
			t.Fatalf("placement from %s: %v (owner %s)", b.id, a.body, owner.id)
		}
		if left := o["expires_in_ms"].(float64); left <= 0 || left > float64(claimTTL.Milliseconds()) {
			t.Fatalf("claim expires in %v ms, want within the claim TTL", left)
		}
	}
}
