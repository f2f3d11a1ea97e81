package peers

import (
	"errors"
	"testing"
)

// TestLeaseSemantics checks that every leaser of the pair table takes real
// exclusive leases, so the benchmark compares like with like: a held key
// is refused to another worker, a give-back with a token that does not hold
// the key is refused and leaves it held, and after the holder's give-back
// another worker takes it. The ceiling takes no lease and is not checked.
func TestLeaseSemantics(t *testing.T) {
	for _, s := range systems {
		if s.name == "ceiling" {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			switch l := openSystem(t, s, 0).(type) {
			case leaser:
				checkOne(t, l, "semantics/"+s.name)
			case batchLeaser:
				checkBatch(t, l, "semantics/"+s.name)
			}
		})
	}
}

func checkOne(t *testing.T, l leaser, key string) {
	token, err := l.acquire(0, key)
	if err != nil {
		t.Fatalf("acquire a free key: %v", err)
	}
	if _, err := l.acquire(1, key); !errors.Is(err, errHeld) {
		t.Fatalf("acquire a held key by another worker: got %v, want errHeld", err)
	}
	if err := l.release(1, key, token+1); !errors.Is(err, errNotHeld) {
		t.Fatalf("release with a token that does not hold: got %v, want errNotHeld", err)
	}
	if _, err := l.acquire(1, key); !errors.Is(err, errHeld) {
		t.Fatalf("after a refused release the key must still be held: got %v", err)
	}
	if err := l.release(0, key, token); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	token, err = l.acquire(1, key)
	if err != nil {
		t.Fatalf("acquire a released key: %v", err)
	}
	if err := l.release(1, key, token); err != nil {
		t.Fatalf("release: %v", err)
	}
}

func checkBatch(t *testing.T, l batchLeaser, key string) {
	keys := []string{key + "-a", key + "-b", key + "-c"}
	tokens, err := l.acquireAll(0, keys)
	if err != nil || len(tokens) != len(keys) {
		t.Fatalf("acquire free keys: %v %v", tokens, err)
	}
	if _, err := l.acquireAll(1, keys[1:2]); !errors.Is(err, errHeld) {
		t.Fatalf("acquire a held key by another worker: got %v, want errHeld", err)
	}
	bad := []int64{tokens[0], tokens[1] + 1000, tokens[2]}
	if err := l.releaseAll(0, keys, bad); !errors.Is(err, errNotHeld) {
		t.Fatalf("the holder's release with one token that does not hold: got %v, want errNotHeld", err)
	}
	// The release above gave back keys a and c (their tokens held) and
	// left b held.
	if _, err := l.acquireAll(1, keys[1:2]); !errors.Is(err, errHeld) {
		t.Fatalf("b must still be held: got %v", err)
	}
	if err := l.releaseAll(0, keys[1:2], tokens[1:2]); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	tokens, err = l.acquireAll(1, keys)
	if err != nil {
		t.Fatalf("acquire released keys: %v", err)
	}
	if err := l.releaseAll(1, keys, tokens); err != nil {
		t.Fatalf("release: %v", err)
	}
}
