package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/musterhq/muster/tests/leasemodel"
)

var linearDuration = flag.Duration("linear.duration", 3*time.Second, "how long the linearizability clients run (longer: -linear.duration=60s)")

const (
	linClients = 8
	linRoutes  = 3
)

// fencedResource is a storage service guarded by fencing tokens: every write
// carries the writer's token, and a correct lease service never lets a
// write by a believed holder go backwards in token order.
type fencedResource struct {
	mu        sync.Mutex
	last      int64
	writes    int
	backwards []string
}

// write checks, under the resource's lock, that the writer still believes
// it holds the lease (its own clock against the expiry it was given, with a
// margin) and records the token order.
func (f *fencedResource) write(token, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().UnixNano() >= exp-int64(5*time.Millisecond) {
		return // no longer sure it holds the lease: a careful client does not write
	}
	if token < f.last {
		f.backwards = append(f.backwards, fmt.Sprintf("token %d after %d", token, f.last))
	}
	f.last = max(f.last, token)
	f.writes++
}

// TestLeaseLinearizability runs concurrent HTTP clients doing random
// acquire/extend/release/query on a few routes with short TTLs, then checks
// the recorded history against the sequential lease model with porcupine,
// and the fenced-resource oracle.
func TestLeaseLinearizability(t *testing.T) {
	b := MustStartWallClockBroker(t)
	routes := [linRoutes]string{"lease://lin/r/0", "lease://lin/r/1", "lease://lin/r/2"}
	var resources [linRoutes]fencedResource
	sessions := make([]string, linClients)
	for i := range sessions {
		sessions[i] = createSession(t, b, "", fmt.Sprintf("client-%d", i), 600000)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: linClients}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		failed  = make(chan error, linClients)
	)
	deadline := time.Now().Add(*linearDuration)
	for c := 0; c < linClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			tokens := [linRoutes]int64{}
			var ops []porcupine.Operation
			for time.Now().Before(deadline) {
				in := leasemodel.Random(rng, tokens[:], 100*time.Millisecond, 200*time.Millisecond)
				in.Client, in.Session = c, c
				out, err := leasemodel.Call(client, b.URL(), "", routes[in.Route], sessions[c], &in)
				if err == nil && out.Status >= 500 {
					err = fmt.Errorf("%v on %s: %d %s", in.Kind, routes[in.Route], out.Status, out.Code)
				}
				if err != nil {
					failed <- err
					return
				}
				if out.Status == 200 && (in.Kind == leasemodel.Acquire || in.Kind == leasemodel.Extend) {
					tokens[in.Route] = out.Token
					resources[in.Route].write(out.Token, out.Exp)
				}
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: in.Call, Output: out, Return: out.Ret})
			}
			mu.Lock()
			history = append(history, ops...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	model := leasemodel.Model(linRoutes)
	res, info := porcupine.CheckOperationsVerbose(model, history, 2*time.Minute)
	writes := 0
	for i := range resources {
		writes += resources[i].writes
		if len(resources[i].backwards) > 0 {
			t.Errorf("route %d: fenced writes went backwards: %v", i, resources[i].backwards)
		}
	}
	t.Logf("%d operations from %d clients in %v; %d fenced writes; porcupine: %s", len(history), linClients, *linearDuration, writes, res)
	if res != porcupine.Ok {
		path := t.TempDir() + "/linearizability.html"
		if err := porcupine.VisualizePath(model, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("the history is not linearizable against the lease model (result %s)", res)
	}
}
