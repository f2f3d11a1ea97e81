package handlers

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// CreateSession creates a session of the caller's family.
func (s *Server) CreateSession(ctx context.Context, req api.CreateSessionRequestObject) (api.CreateSessionResponseObject, error) {
	var id core.SessionID
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	c := callerFrom(ctx)
	info, err := s.broker.CreateSession(ctx, core.SessionRequest{Family: c.Family, ID: id, OwnerID: req.Body.OwnerId, TTL: time.Duration(req.Body.TtlMs) * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return api.CreateSession201JSONResponse{
		SessionId:         info.ID.String(),
		HolderIncarnation: info.Incarnation,
		OwnerId:           info.OwnerID,
		TtlMs:             info.TTL.Milliseconds(),
		ExpiresAt:         info.ExpiresAt.UTC(),
		Epoch:             s.broker.Epoch(),
	}, nil
}

// KeepaliveSession moves a session's expiry.
func (s *Server) KeepaliveSession(ctx context.Context, req api.KeepaliveSessionRequestObject) (api.KeepaliveSessionResponseObject, error) {
	id, err := core.ParseSessionID(req.SessionId)
	if err != nil {
		return nil, err
	}
	info, err := s.broker.Keepalive(ctx, callerFrom(ctx).Family, id)
	if err != nil {
		return nil, err
	}
	return api.KeepaliveSession200JSONResponse{ExpiresAt: info.ExpiresAt.UTC(), TtlMs: info.TTL.Milliseconds()}, nil
}

// DeleteSession ends a session and everything it owns.
func (s *Server) DeleteSession(ctx context.Context, req api.DeleteSessionRequestObject) (api.DeleteSessionResponseObject, error) {
	id, err := core.ParseSessionID(req.SessionId)
	if err != nil {
		return nil, err
	}
	if err := s.broker.EndSession(ctx, callerFrom(ctx).Family, id); err != nil {
		return nil, err
	}
	return api.DeleteSession204Response{}, nil
}
