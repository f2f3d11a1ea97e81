package handlers

import (
	"context"

	"github.com/musterhq/muster/core"
)

// Every operation of the contract is implemented; what remains here are the
// route and selector authorization helpers the lease operations share.

// authorizeRoute parses an exact route from its path segments and checks
// that one grant covers it with access a.
func authorizeRoute(ctx context.Context, realm, area, resource string, a core.Access) (core.Route, error) {
	r, err := core.NewRoute(realm, area, resource)
	if err != nil {
		return r, err
	}
	return r, allowLease(callerFrom(ctx), r.Selector(), a)
}

// authorizeSelector parses a selector and checks that one grant covers its
// whole match set with access a.
func authorizeSelector(ctx context.Context, raw string, a core.Access) (core.Selector, error) {
	sel, err := core.ParseSelector(raw)
	if err != nil {
		return sel, err
	}
	return sel, allowLease(callerFrom(ctx), sel, a)
}
