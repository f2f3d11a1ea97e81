package fleetstore

import (
	"errors"
	"sync"
	"testing"

	"github.com/musterhq/muster"
)

// testSpecsPerRoot: a root at its quota refuses the next spec with
// spec_limit (scope root) and stores nothing; other roots and families are
// untouched; forgetting frees room.
func testSpecsPerRoot(t *testing.T, st storage) {
	f := New(st.open())
	f.SpecsPerRoot = func(family string) int {
		if family == "small" {
			return 3
		}
		return 0
	}
	var last string
	for range 3 {
		last = mustRegister(t, f, "small", root, "k", `{}`)
	}
	_, err := f.Register(ctx, "small", root, "k", []byte(`{}`))
	var ce *muster.Error
	if !errors.As(err, &ce) || ce.Code != muster.CodeSpecLimit || ce.Scope != muster.ScopeRoot {
		t.Fatalf("4th spec: %v, want spec_limit with scope root", err)
	}
	if n := len(listAll(t, f, "small", root, 0)); n != 3 {
		t.Fatalf("the refused register left %d specs", n)
	}
	mustRegister(t, f, "small", "monitors/other", "k", `{}`) // another root
	for range 5 {
		mustRegister(t, f, fam, root, "k", `{}`) // another family, no quota
	}
	must(t, f.Forget(ctx, "small", root, last))
	again := mustRegister(t, f, "small", root, "k", `{}`)
	if again == last {
		t.Fatalf("a name was reused: %s", again)
	}

	// Racing registers: the quota holds (bbolt serializes writers; on
	// PostgreSQL each racing connection may pass it by one).
	const racers = 16
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() { _, _ = f.Register(ctx, "small", "race", "k", []byte(`{}`)) })
	}
	wg.Wait()
	n := len(listAll(t, f, "small", "race", 0))
	if n < 3 || n > 3+DefaultPostgresConns {
		t.Fatalf("%d racing registers stored %d specs under a quota of 3", racers, n)
	}
	if _, bbolt := f.store.(*boltStore); bbolt && n != 3 {
		t.Fatalf("bbolt stored %d specs under a quota of 3", n)
	}
}
