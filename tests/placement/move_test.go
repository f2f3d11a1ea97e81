package placement

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `muster placement move` pins a family to a broker: its owner hands it
// over there with its sessions and leases, and `--to auto` unpins it. A
// broker name that is not live is refused and records nothing.
func TestManualMoveKeepsSessions(t *testing.T) {
	c := newCluster(t, 3, "acme")
	old := c.waitSettled("acme", c.brokers, 15*time.Second)
	holder, tok := holdJob(t, old)
	to := without(c.brokers, old)[0]
	if a, err := call(old.url, "acme", "POST", "/v1/placement/move", map[string]any{"to": "nobody"}); err != nil || a.status != http.StatusBadRequest {
		t.Fatalf("a move to no live broker: %d %v %v", a.status, a.body, err)
	}
	// Through the CLI, asking a broker that is neither the owner nor the target.
	asked := without(without(c.brokers, old), to)[0]
	start := time.Now()
	out, err := exec.Command(c.bin, "placement", "move", "acme", "--to", to.id, "--addr", asked.url, "--token", secret("acme")).CombinedOutput()
	if err != nil {
		t.Fatalf("muster placement move: %v\n%s", err, out)
	}
	t.Logf("moved in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(string(out), "owner") || !strings.Contains(string(out), to.id) {
		t.Fatalf("the CLI did not report the new owner:\n%s", out)
	}
	if o := c.waitOwner("acme", c.brokers, 10*time.Second); o != to {
		t.Fatalf("the family is on %s, pinned to %s", o.id, to.id)
	}
	ext, err := call(to.url, "acme", "POST", "/v1/leases/r/a/job/extend", map[string]any{"session_id": holder, "fencing_token": tok, "ttl_ms": 30000})
	if err != nil || ext.status != http.StatusOK {
		t.Fatalf("extend with the old token after the move: %d %v %v", ext.status, ext.body, err)
	}
	p, err := call(old.url, "acme", "GET", "/v1/placement", nil)
	if err != nil || p.body["pinned"] != to.id {
		t.Fatalf("placement after the move: %v %v", p.body, err)
	}
	// The pin holds: the family stays on the pinned broker round after round.
	time.Sleep(3 * c.timing.every)
	if o := c.waitOwner("acme", c.brokers, 10*time.Second); o != to {
		t.Fatalf("the family left its pin for %s", o.id)
	}
	if out, err := exec.Command(c.bin, "placement", "move", "acme", "--to", "auto", "--addr", to.url, "--token", secret("acme")).CombinedOutput(); err != nil {
		t.Fatalf("unpin: %v\n%s", err, out)
	}
	// Every broker reads the pins each round.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		p, err = call(old.url, "acme", "GET", "/v1/placement", nil)
		if _, pinned := p.body["pinned"]; err == nil && !pinned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("placement after unpinning: %v %v", p.body, err)
		}
	}
	o := c.waitSettled("acme", c.brokers, 15*time.Second)
	if ka, err := call(o.url, "acme", "POST", "/v1/sessions/"+holder+"/keepalive", nil); err != nil || ka.status != http.StatusOK {
		t.Fatalf("the session after unpinning (on %s): %d %v %v", o.id, ka.status, ka.body, err)
	}
}
