package handlers

import (
	"context"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// Operations of the contract that later work implements. Each one already
// validates its route or selector and authorizes the caller, then answers
// 501 `not_implemented` with a problem body.

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

func (s *Server) Unsubscribe(ctx context.Context, req api.UnsubscribeRequestObject) (api.UnsubscribeResponseObject, error) {
	if _, err := authorizeSelector(ctx, req.Params.Selector, core.Read); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) RegisterSpec(ctx context.Context, req api.RegisterSpecRequestObject) (api.RegisterSpecResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Write); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) ListSpecs(ctx context.Context, req api.ListSpecsRequestObject) (api.ListSpecsResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Read); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) GetSpec(ctx context.Context, req api.GetSpecRequestObject) (api.GetSpecResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Read); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) ForgetSpec(ctx context.Context, req api.ForgetSpecRequestObject) (api.ForgetSpecResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Write); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) SweepSpecs(ctx context.Context, req api.SweepSpecsRequestObject) (api.SweepSpecsResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Write); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}

func (s *Server) PlanFleet(context.Context, api.PlanFleetRequestObject) (api.PlanFleetResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) FleetGap(ctx context.Context, req api.FleetGapRequestObject) (api.FleetGapResponseObject, error) {
	if err := allowFleet(callerFrom(ctx), req.Root, core.Read); err != nil {
		return nil, err
	}
	if _, err := authorizeSelector(ctx, req.Params.Live, core.Read); err != nil {
		return nil, err
	}
	return nil, errNotImplemented
}
