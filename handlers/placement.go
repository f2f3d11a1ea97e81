package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// Directory says which broker serves a family in a multi-broker deployment
// (docs/placement.md). The placement loop at the edge implements it from the
// claims it reads; it must answer without blocking.
type Directory interface {
	// Owner is the base URL of the broker that serves family now, and false
	// when no broker does (a failover is in progress) or when the answer
	// would be this broker itself (its claim is being taken or given up).
	Owner(family string) (addr string, ok bool)
	// Describe is what GET /v1/placement shows of family: this broker's
	// name, the family's live claim (nil when none), the live brokers.
	Describe(family string) PlacementView
	// Route is where to send a request for family that this broker did
	// not serve when it arrived, after a fresh look at the claims (bounded
	// by ctx and by about a second): a planned move to this broker or away
	// from it may be under way. It may name this broker itself, which now
	// serves the family. False when no broker serves it.
	Route(ctx context.Context, family string) (addr string, ok bool)
	// Move pins family to the live broker to ("auto": removes the pin), for
	// every broker of the deployment; the owner hands the family over.
	Move(ctx context.Context, family, to string) error
}

// PlacementView is one family's placement as a broker last read it.
type PlacementView struct {
	Self    string
	Pinned  string // "" when the automatic choice applies
	Owner   *api.PlacementOwner
	Brokers []api.PlacementBroker
}

// GetPlacement answers where the caller's family is served. It needs read
// on some lease pattern of the family and shows nothing of another family.
func (s *Server) GetPlacement(ctx context.Context, _ api.GetPlacementRequestObject) (api.GetPlacementResponseObject, error) {
	c := callerFrom(ctx)
	if !c.Grants.AllowsSomeLease(core.Read) {
		return nil, errForbidden
	}
	return api.GetPlacement200JSONResponse(s.placement(c)), nil
}

// MovePlacement pins the caller's family to a broker (a manual planned
// move). It needs write on every lease of the family.
func (s *Server) MovePlacement(ctx context.Context, req api.MovePlacementRequestObject) (api.MovePlacementResponseObject, error) {
	c := callerFrom(ctx)
	if !c.Grants.AllowsLease(everyLease, core.Write) {
		return nil, errForbidden
	}
	if s.directory == nil {
		return nil, muster.Errorf(muster.CodeNotImplemented, "this broker runs alone: there is nothing to move (docs/placement.md)")
	}
	if err := s.directory.Move(ctx, string(c.Family), req.Body.To); err != nil {
		return nil, err
	}
	return api.MovePlacement202JSONResponse(s.placement(c)), nil
}

// everyLease is lease://**, every lease of a family.
var everyLease = func() core.Selector {
	sel, err := core.ParseSelector("lease://**")
	if err != nil {
		panic(err)
	}
	return sel
}()

// placement is the caller's family's placement as this broker reads it.
func (s *Server) placement(c *Caller) api.Placement {
	out := api.Placement{Family: string(c.Family), Placed: s.directory != nil}
	if s.directory != nil {
		v := s.directory.Describe(string(c.Family))
		out.Broker, out.Owner = &v.Self, v.Owner
		if v.Pinned != "" {
			out.Pinned = &v.Pinned
		}
		if v.Brokers == nil {
			v.Brokers = []api.PlacementBroker{}
		}
		out.Brokers = &v.Brokers
	}
	return out
}

// misdirectedProblem is the problem body of wrong_broker: the owner's base URL.
type misdirectedProblem struct {
	problem
	Owner string `json:"owner"`
}

// writeMisdirected answers a request for a family this broker did not
// serve: 421 wrong_broker naming the owner, or 503 family_unavailable with
// Retry-After when no broker serves it now. The owner is read after a
// fresh look at the claims (Directory.Route): in a planned move the old
// owner names the new one once the handover is written, and the new owner
// names itself once it serves the family, so that a client following the
// answers reaches the family's sessions in at most two hops and never
// hears family_unavailable (which ends sessions) in between.
func (s *Server) writeMisdirected(w http.ResponseWriter, r *http.Request, family string) {
	var addr string
	ok := false
	if s.directory != nil {
		addr, ok = s.directory.Route(r.Context(), family)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if !ok {
		code := muster.CodeFamilyUnavailable
		setRetryAfter(h, code)
		w.WriteHeader(httpStatus(code))
		_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: http.StatusText(httpStatus(code)),
			Status: httpStatus(code), Code: code, Detail: "no broker serves the family right now: retry shortly"})
		return
	}
	code := muster.CodeWrongBroker
	w.WriteHeader(httpStatus(code))
	_ = json.NewEncoder(w).Encode(misdirectedProblem{
		problem: problem{Type: "about:blank", Title: http.StatusText(httpStatus(code)), Status: httpStatus(code),
			Code: code, Detail: "another broker serves the family: send the request to owner"},
		Owner: addr,
	})
}

// snapshotErr is the error of a snapshot that could not be taken: a family
// this broker does not serve keeps its wrong_broker refusal (answered 421
// or 503 by writeError); any other failure is inventory_unavailable.
func snapshotErr(err error) error {
	if muster.ErrorCode(err) == muster.CodeWrongBroker {
		return err
	}
	return muster.Errorf(muster.CodeInventoryUnavailable, "no inventory snapshot could be taken")
}

// writeError is the package's writeError, except that a core refusal of a
// family this broker does not serve becomes the placement answer.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *muster.Error
	if errors.As(err, &e) && e.Code == muster.CodeWrongBroker {
		if c := callerFrom(r.Context()); c != nil {
			s.writeMisdirected(w, r, string(c.Family))
			return
		}
	}
	writeError(s.log, w, r, err)
}
