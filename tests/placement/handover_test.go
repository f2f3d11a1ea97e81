package placement

import (
	"net/http"
	"testing"
	"time"
)

// A planned move keeps the family's sessions and leases: after SIGTERM of
// the owner, the same session id, lease and fencing token work at the new
// owner; a grant there is fenced above the moved one; a waiter queued at
// the old owner is answered wrong_broker naming the new owner.
func TestPlannedMoveKeepsSessions(t *testing.T) {
	c := newCluster(t, 3, "acme")
	old := c.waitSettled("acme", c.brokers, 15*time.Second)
	holder, tok := holdJob(t, old)
	waiter, _, _ := newSession(old.url, "acme")
	queued := make(chan answer, 1)
	go func() {
		a, _ := callOn(&http.Client{Timeout: 40 * time.Second}, old.url, "acme", "POST", "/v1/leases/r/a/job/acquire",
			map[string]any{"session_id": waiter, "ttl_ms": 30000, "wait_ms": 25000})
		queued <- a
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	old.term(t)
	rest := without(c.brokers, old)
	o := c.waitOwner("acme", rest, 10*time.Second)
	t.Logf("SIGTERM to a new owner serving: %v", time.Since(start).Round(time.Millisecond))
	w := <-queued
	if w.status != http.StatusMisdirectedRequest || w.body["owner"] != o.url {
		t.Fatalf("the waiter got %d %v, want 421 naming %s", w.status, w.body, o.url)
	}
	// The client follows the answer: its session and lease are there.
	ka, err := call(o.url, "acme", "POST", "/v1/sessions/"+holder+"/keepalive", nil)
	if err != nil || ka.status != http.StatusOK {
		t.Fatalf("keepalive of the moved session at the new owner: %d %v %v", ka.status, ka.body, err)
	}
	ext, err := call(o.url, "acme", "POST", "/v1/leases/r/a/job/extend", map[string]any{"session_id": holder, "fencing_token": tok, "ttl_ms": 30000})
	if err != nil || ext.status != http.StatusOK {
		t.Fatalf("extend with the old token at the new owner: %d %v %v", ext.status, ext.body, err)
	}
	other, _, _ := newSession(o.url, "acme")
	if a, _ := call(o.url, "acme", "POST", "/v1/leases/r/a/job/acquire", map[string]any{"session_id": other, "ttl_ms": 5000}); a.code() != "lease_held" {
		t.Fatalf("the moved lease is free at the new owner: %d %v", a.status, a.body)
	}
	tok2, a, err := acquire(o.url, "acme", other, "job2")
	if err != nil || tok2 <= tok {
		t.Fatalf("a grant at the new owner: token %d after the moved %d (%d %v)", tok2, tok, a.status, err)
	}
	if a, _ := call(o.url, "acme", "POST", "/v1/sessions/"+waiter+"/keepalive", nil); a.status != http.StatusOK {
		t.Fatalf("the waiter's session moved too: %d %v", a.status, a.body)
	}
}
