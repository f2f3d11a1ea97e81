package placement

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// fencedStore is a resource guarded by fencing tokens, as an application
// would write one: it keeps the highest token it accepted and refuses
// lower ones.
type fencedStore struct {
	mu      sync.Mutex
	highest uint64
	writes  []fencedWrite
	// killEpoch is the placement epoch of the highest token when the
	// owner was killed.
	killEpoch uint64
}

// newEpochWrites counts the accepted writes of epochs after killEpoch.
func newEpochWrites(f *fencedStore) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.writes {
		if w.accepted && w.token>>epochShift > f.killEpoch {
			n++
		}
	}
	return n
}

type fencedWrite struct {
	worker   int
	token    uint64
	accepted bool
	highest  uint64 // the store's highest token when the write came
}

// write is one careful write: the worker calls it only while it believes it
// holds the lease (before the expiry it was given, by its own clock).
func (f *fencedStore) write(worker int, token uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.add(worker, token)
}

// writeBefore is a careful write by a worker that was told its lease
// expires at exp (unix ns): it writes only until 5 ms before, by the clock
// read under the store's lock (a write and a later holder's cannot swap).
func (f *fencedStore) writeBefore(worker int, token uint64, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().UnixNano() < exp-int64(5*time.Millisecond) {
		f.add(worker, token)
	}
}

func (f *fencedStore) add(worker int, token uint64) {
	w := fencedWrite{worker: worker, token: token, highest: f.highest, accepted: token >= f.highest}
	if w.accepted {
		f.highest = token
	}
	f.writes = append(f.writes, w)
}

const epochShift = 32 // core.EpochShift: the placement epoch in tokens

// The fenced-resource oracle across a failover: workers that write only
// while they believe they hold one lease never write behind a newer holder
// within one placement epoch (one broker serving the family); a write that
// does come behind one is a stale holder of an earlier epoch (its broker was
// killed while it still believed), and the fenced resource refuses it.
func TestFencedResourceAcrossFailover(t *testing.T) {
	const (
		workers = 4
		ttl     = 5 * time.Second // longer than the failover: a stale holder outlives its broker
	)
	c := newCluster(t, 3, "acme")
	c.waitSettled("acme", c.brokers, 15*time.Second)
	var mu sync.Mutex
	alive := c.brokers
	var store fencedStore
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				bs := alive
				mu.Unlock()
				for _, b := range bs {
					s, _, err := newSession(b.url, "acme")
					if err != nil || s == "" {
						continue
					}
					sent := time.Now()
					a, err := call(b.url, "acme", "POST", "/v1/leases/r/a/shared/acquire",
						map[string]any{"session_id": s, "ttl_ms": ttl.Milliseconds(), "wait_ms": 1000})
					if err != nil || a.status != 200 {
						_, _ = call(b.url, "acme", "DELETE", "/v1/sessions/"+s, nil)
						break
					}
					tok := uint64(a.body["fencing_token"].(float64))
					believe := sent.Add(ttl - 50*time.Millisecond) // counted from before the request: never late
					for time.Now().Before(believe) && time.Since(sent) < 400*time.Millisecond {
						store.write(w, tok)
						time.Sleep(20 * time.Millisecond)
					}
					// Hold a little longer when the broker is gone (kill -9):
					// a stale holder keeps writing until its belief runs out.
					if _, err := call(b.url, "acme", "POST", "/v1/leases/r/a/shared/release",
						map[string]any{"session_id": s, "fencing_token": tok}); err != nil {
						for time.Now().Before(believe) {
							store.write(w, tok)
							time.Sleep(20 * time.Millisecond)
						}
					}
					_, _ = call(b.url, "acme", "DELETE", "/v1/sessions/"+s, nil)
					break
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	owner := c.waitOwner("acme", c.brokers, 5*time.Second)
	store.mu.Lock()
	store.killEpoch = store.highest >> epochShift
	store.mu.Unlock()
	owner.kill9(t)
	mu.Lock()
	alive = without(c.brokers, owner)
	mu.Unlock()
	// Run until the new owner's holders have written for a while.
	killed := time.Now()
	for {
		store.mu.Lock()
		top := store.highest
		store.mu.Unlock()
		if top>>epochShift > 0 && time.Since(killed) > ttl && newEpochWrites(&store) >= 20 {
			break
		}
		if time.Since(killed) > 30*time.Second {
			break // the check below reports it
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	epochs := map[uint64]int{}
	var refused int
	for i, w := range store.writes {
		if w.accepted {
			epochs[w.token>>epochShift]++
			continue
		}
		refused++
		if w.token>>epochShift == w.highest>>epochShift {
			t.Fatalf("write %d: worker %d wrote token %d behind %d within one placement epoch", i, w.worker, w.token, w.highest)
		}
	}
	if newEpochWrites(&store) == 0 {
		t.Fatalf("no accepted write above the killed owner's epoch %d: %v", store.killEpoch, epochs)
	}
	if len(epochs) < 2 {
		t.Fatalf("accepted writes in %d placement epoch(s), want the failover under load: %v", len(epochs), epochs)
	}
	t.Logf("%d writes; accepted per epoch %v; %d refused, all from stale holders of an earlier epoch",
		len(store.writes), fmt.Sprint(epochs), refused)
}
