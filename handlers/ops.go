package handlers

import (
	"context"
	"errors"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
)

// Healthz answers while the process is alive, with the build it runs.
func (s *Server) Healthz(context.Context, api.HealthzRequestObject) (api.HealthzResponseObject, error) {
	dev := s.auth.DevMode()
	b := muster.BuildInfo()
	h := api.Healthz200JSONResponse{Status: "ok", Epoch: s.broker.Epoch(), DevMode: &dev,
		Version: &b.Version, Commit: &b.Commit, GoVersion: &b.GoVersion}
	if b.CommitTime != "" {
		h.CommitTime = &b.CommitTime
	}
	return h, nil
}

// Readyz answers 200 when the actor answers and the dependencies are reachable.
func (s *Server) Readyz(ctx context.Context, req api.ReadyzRequestObject) (api.ReadyzResponseObject, error) {
	if _, err := s.broker.Stats(ctx); err != nil {
		return nil, muster.Errorf(muster.CodeUnavailable, "the lease core does not answer")
	}
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			var ce *muster.Error
			if errors.As(err, &ce) && ce.Code == muster.CodeUnavailable {
				return nil, ce
			}
			s.log.Warn("readiness check failed", "err", err)
			return nil, muster.Errorf(muster.CodeUnavailable, "a dependency does not answer")
		}
	}
	dev := s.auth.DevMode()
	return api.Readyz200JSONResponse{Status: "ready", Epoch: s.broker.Epoch(), DevMode: &dev}, nil
}

// The following are served by routes (they need the writer) and never reach
// the strict layer.

func (s *Server) Docs(context.Context, api.DocsRequestObject) (api.DocsResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Metrics(context.Context, api.MetricsRequestObject) (api.MetricsResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) OpenapiSpec(context.Context, api.OpenapiSpecRequestObject) (api.OpenapiSpecResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) WatchLeases(context.Context, api.WatchLeasesRequestObject) (api.WatchLeasesResponseObject, error) {
	return nil, errNotImplemented
}
