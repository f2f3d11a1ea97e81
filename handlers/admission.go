package handlers

import (
	"sync"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
)

// admission bounds the requests of one kind in the broker at once, per
// family and in all, before their bodies are read. Only a caller with
// access on some fleet root is counted (the contract refuses others with
// forbidden first: the root's own grant is checked by the handler, once the
// root is parsed). A request beyond either
// bound is refused at once (429 queue_full with the bound's scope and a
// Retry-After), holding nothing. A plan holds tens of MiB of decoded names
// while it runs; a sweep holds its schema while it waits for a slot.
type admission struct {
	what          string      // "plans", "sweeps": named in the refusal
	access        core.Access // asked of some fleet grant of the caller
	perFamily, in int         // the bounds
	mu            sync.Mutex
	all           int
	fam           map[string]int
}

// The admission bounds. Plans run without waiting, so their bound is on
// those running; a sweep waits for its family's slot and one of the
// broker's (sweepGate), so its bound counts the running and the waiting.
const (
	PlansPerFamily  = 2
	PlansRunning    = 4
	SweepsPerFamily = 4  // its one running and three waiting
	SweepsAdmitted  = 32 // running and waiting, all families
)

func newAdmission(what string, access core.Access, perFamily, all int) *admission {
	return &admission{what: what, access: access, perFamily: perFamily, in: all, fam: map[string]int{}}
}

// enter admits one request of family, or refuses it; leave gives the place
// back.
func (a *admission) enter(family string) (leave func(), err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fam[family] >= a.perFamily {
		return nil, muster.LimitErrorf(muster.CodeQueueFull, muster.ScopeFamily,
			"the family has %d %s in the broker already; retry later", a.perFamily, a.what)
	}
	if a.all >= a.in {
		return nil, muster.LimitErrorf(muster.CodeQueueFull, muster.ScopeBroker,
			"the broker has %d %s in it already; retry later", a.in, a.what)
	}
	a.fam[family]++
	a.all++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.all--
		if a.fam[family]--; a.fam[family] == 0 {
			delete(a.fam, family)
		}
	}, nil
}
