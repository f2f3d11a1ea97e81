package handlers

import (
	"context"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// Unsubscribe removes exactly one registration (session, original selector).
func (s *Server) Unsubscribe(ctx context.Context, req api.UnsubscribeRequestObject) (api.UnsubscribeResponseObject, error) {
	sel, err := authorizeSelector(ctx, req.Params.Selector, core.Read)
	if err != nil {
		return nil, err
	}
	id, err := core.ParseSessionID(req.SessionId)
	if err != nil {
		return nil, err
	}
	if err := s.broker.Unsubscribe(ctx, callerFrom(ctx).Family, id, sel); err != nil {
		return nil, err
	}
	return api.Unsubscribe204Response{}, nil
}
