package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/fleetstore/judge"
)

// The fleet operations: the desired set of the caller's family under one
// root. The root arrives decoded ("inst-7%2Fmon" is "inst-7/mon"); it is
// judged before authorization, so an illegal root is invalid_request rather
// than forbidden. Families never meet: every call names the caller's own.
//
// Specs leave exactly as they were registered. The generated response types
// encode through encoding/json, which compacts a json.RawMessage (and any
// MarshalJSON result) and escapes <, > and &; the spec-carrying answers are
// therefore written by rawJSON instead.

// MaxSpecPageBytes bounds the specs of one listSpecs page: a page stops
// before the row that would cross it (it always holds at least one row), and
// its next_cursor resumes after the last row sent.
const MaxSpecPageBytes = 1 << 20

// fleetCursorSelector is what a listSpecs cursor is bound to besides the
// family and the epoch: the root, in a namespace no lease selector can use.
func fleetCursorSelector(root string) string { return "fleet:" + root }

// fleetScope checks the root and that one grant of the caller covers it with
// access a, and returns the caller's family.
func fleetScope(ctx context.Context, root string, a core.Access) (string, error) {
	if _, err := muster.ParseFleetRoot(root); err != nil {
		return "", err
	}
	c := callerFrom(ctx)
	if err := allowFleet(c, root, a); err != nil {
		return "", err
	}
	return string(c.Family), nil
}

// fleetErr passes the fleet store's errors through: a request error as it
// is, a backend failure as its public part, with the cause logged (it may
// quote stored values, so it is never shown).
func (s *Server) fleetErr(ctx context.Context, op string, err error) error {
	var be *fleetstore.BackendError
	if !errors.As(err, &be) {
		return err
	}
	if ctx.Err() == nil {
		s.log.Error("fleet store failed", "op", op, "code", be.Public.Code, "err", be.Cause)
	}
	return be.Public
}

// RegisterSpec mints "<kind>-<n>" and stores the spec; the 201 is sent only
// once the spec is durable.
func (s *Server) RegisterSpec(ctx context.Context, req api.RegisterSpecRequestObject) (api.RegisterSpecResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Write)
	if err != nil {
		return nil, err
	}
	spec := []byte(req.Body.Spec)
	if len(spec) <= fleetstore.MaxSpecBytes && !utf8.Valid(spec) {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "spec is not valid UTF-8")
	}
	name, err := s.fleet.Register(ctx, fam, req.Root, req.Body.Kind, spec)
	if err != nil {
		return nil, s.fleetErr(ctx, "register", err)
	}
	return rawJSON{status: http.StatusCreated, body: s.appendRow(nil, fleetstore.Row{Name: name, Spec: spec})}, nil
}

// GetSpec reads one spec.
func (s *Server) GetSpec(ctx context.Context, req api.GetSpecRequestObject) (api.GetSpecResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Read)
	if err != nil {
		return nil, err
	}
	row, err := s.fleet.Get(ctx, fam, req.Root, req.Name)
	if err != nil {
		return nil, s.fleetErr(ctx, "get", err)
	}
	return rawJSON{status: http.StatusOK, body: s.appendRow(nil, row)}, nil
}

// ForgetSpec is the one door out of the desired set. An illegal name is
// refused and nothing is deleted; a legal name that is absent succeeds.
func (s *Server) ForgetSpec(ctx context.Context, req api.ForgetSpecRequestObject) (api.ForgetSpecResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Write)
	if err != nil {
		return nil, err
	}
	if err := s.fleet.Forget(ctx, fam, req.Root, req.Name); err != nil {
		return nil, s.fleetErr(ctx, "forget", err)
	}
	return api.ForgetSpec204Response{}, nil
}

// ListSpecs pages the root's specs in name order. The cursor is signed like
// a LIST cursor (family, epoch, "fleet:<root>") and carries the last name
// sent; pages are not a snapshot (see fleetstore.Fleet.Desired).
func (s *Server) ListSpecs(ctx context.Context, req api.ListSpecsRequestObject) (api.ListSpecsResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Read)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(req.Params.Limit, fleetstore.DefaultPageSize, fleetstore.MaxPageSize)
	if err != nil {
		return nil, err
	}
	sel := fleetCursorSelector(req.Root)
	after := ""
	if req.Params.Cursor != nil {
		cur, err := s.cursors.Decode(*req.Params.Cursor, core.Family(fam), sel)
		if err != nil {
			return nil, err
		}
		after = cur.After
	}
	rows, more, err := s.fleet.Desired(ctx, fam, req.Root, after, limit)
	if err != nil {
		return nil, s.fleetErr(ctx, "list", err)
	}
	b := append(make([]byte, 0, 256), `{"items":[`...)
	size := 0
	for i, r := range rows {
		if i > 0 && size+len(r.Spec) > MaxSpecPageBytes {
			rows, more = rows[:i], true
			break
		}
		size += len(r.Spec)
		if i > 0 {
			b = append(b, ',')
		}
		b = s.appendRow(b, r)
	}
	b = append(b, ']')
	if more && len(rows) > 0 {
		next := s.cursors.Encode(core.Cursor{Epoch: s.broker.Epoch(), Family: core.Family(fam), Selector: sel, After: rows[len(rows)-1].Name})
		b = append(b, `,"next_cursor":`...)
		b = appendJSONString(b, next)
	}
	b = append(b, '}')
	return rawJSON{status: http.StatusOK, body: b}, nil
}

// SweepSpecs is the boot move, validate-or-drop, against the caller's JSON
// Schema.
func (s *Server) SweepSpecs(ctx context.Context, req api.SweepSpecsRequestObject) (api.SweepSpecsResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Write)
	if err != nil {
		return nil, err
	}
	// The cheap checks refuse a hostile schema at once; compiling (up to
	// ~0.4 s for 256 KiB) and validating wait for the family's turn.
	if err := fleetstore.PrecheckSchema(req.Body.Schema); err != nil {
		s.metrics.sweeps.WithLabelValues(sweepOutcome(ctx, err)).Inc()
		return nil, err
	}
	s.metrics.sweepsWaiting.Inc()
	leave, err := s.sweeps.enter(ctx, fam)
	s.metrics.sweepsWaiting.Dec()
	if err != nil {
		s.metrics.sweeps.WithLabelValues(sweepOutcome(ctx, err)).Inc()
		return nil, err
	}
	s.metrics.sweepsRunning.Inc()
	res, err := s.sweep(ctx, fam, req.Root, req.Body.Schema)
	s.metrics.sweepsRunning.Dec()
	leave()
	s.metrics.sweeps.WithLabelValues(sweepOutcome(ctx, err)).Inc()
	if err != nil {
		return nil, s.fleetErr(ctx, "sweep", err)
	}
	return sweepAnswer{s: s, ctx: ctx, fam: fam, root: req.Root, res: res}, nil
}

// sweepAnswer writes a sweep's result as it reads the kept specs back, a
// page at a time (Fleet.KeptRows): the broker never holds more than a page
// of specs, whatever the root holds. The status is sent before the first
// spec is read, so a store that fails then can only cut the answer: the
// connection is closed mid-body, and the client sees an incomplete JSON
// document, never a complete one that lies.
type sweepAnswer struct {
	s    *Server
	ctx  context.Context
	fam  string
	root string
	res  fleetstore.SweepNamesResult
}

func (a sweepAnswer) VisitSweepSpecsResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	b := append(make([]byte, 0, 64<<10), `{"kept":[`...)
	first := true
	err := a.s.fleet.KeptRows(a.ctx, a.fam, a.root, a.res.Kept, func(r fleetstore.Row) error {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = a.s.appendRow(b, r)
		if len(b) < 32<<10 {
			return nil
		}
		_, err := w.Write(b)
		b = b[:0]
		return err
	})
	if err != nil {
		if a.ctx.Err() == nil {
			a.s.log.Error("sweep answer cut: reading the kept specs back failed", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	b = append(b, `],"dropped":[`...)
	for i, name := range a.res.Dropped {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
	}
	b = append(b, `],"invalid":[`...)
	for i, iv := range a.res.Invalid {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, iv.Name)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, iv.Reason)
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	_, err = w.Write(b)
	return err
}

// sweep compiles the schema and judges the specs in a worker process of
// their own, bounded in CPU, memory and time (package judge), and drops what
// the worker judges invalid.
func (s *Server) sweep(ctx context.Context, fam, root string, raw []byte) (fleetstore.SweepNamesResult, error) {
	w, err := judge.Start(ctx, s.sweepWorker, raw, s.sweepLimits)
	if err != nil {
		return fleetstore.SweepNamesResult{}, s.workerErr(ctx, err)
	}
	res, err := s.fleet.SweepNames(ctx, fam, root, func(r fleetstore.Row) (bool, error) { return w.Judge(r.Spec) })
	u := w.Close()
	s.metrics.sweepCPU.Observe(u.CPU.Seconds())
	s.metrics.sweepMemory.Observe(float64(u.MaxRSS))
	return res, s.workerErr(ctx, err)
}

// workerErr logs a worker that failed without an answer, and turns one that
// could not start into CodeInternal.
func (s *Server) workerErr(ctx context.Context, err error) error {
	var f *judge.Failure
	var me *muster.Error
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.As(err, &f):
		s.log.Error("sweep worker failed", "err", f.Cause, "stderr", f.Stderr)
	case !errors.As(err, &me):
		s.log.Error("sweep worker failed", "err", err)
		return muster.Errorf(muster.CodeInternal, "the sweep worker failed")
	}
	return err
}

// sweepOutcome is the muster_fleet_sweeps_total label of a sweep's end.
func sweepOutcome(ctx context.Context, err error) string {
	var be *fleetstore.BackendError
	switch {
	case err == nil:
		return "ok"
	case ctx.Err() != nil:
		return "abandoned"
	case errors.As(err, &be):
		return "failed"
	default:
		return "refused"
	}
}

// PlanFleet is the pure difference of two name lists. It reads and changes
// nothing and names no root, so no root's grant can be asked of it: the
// contract asks read on some fleet root of the caller (a lease-only token
// is refused) and bounds the plans in the broker at once (admission).
func (s *Server) PlanFleet(_ context.Context, req api.PlanFleetRequestObject) (api.PlanFleetResponseObject, error) {
	missing, orphans := fleetstore.Plan(req.Body.Desired, req.Body.Live)
	return api.PlanFleet200JSONResponse{Missing: missing, Orphans: orphans}, nil
}

// FleetGap plans the root's desired set against the resource segments of the
// held leases matching the live selector, read from one inventory snapshot
// whose revision it reports. The live side is read first: a unit being
// stopped (lease released, then spec forgotten) can then show as an orphan
// but never as missing, so a reconciler acting on missing never restarts
// what an operator just stopped.
//
// Work and memory per page are bounded by the limit: at most limit names of
// each side are held (see core.Snapshot.LiveNames and Fleet.NamePage). The
// page covers the names in (after, end]: end is the last desired name read
// when more follow, lowered to the last live name kept when the live side
// was cut. The first page reads an unregistered view and registers it only
// when a next page is needed, so single-page gaps cost no snapshot slot.
func (s *Server) FleetGap(ctx context.Context, req api.FleetGapRequestObject) (api.FleetGapResponseObject, error) {
	fam, err := fleetScope(ctx, req.Root, core.Read)
	if err != nil {
		return nil, err
	}
	sel, err := authorizeSelector(ctx, req.Params.Live, core.Read)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(req.Params.Limit, core.DefaultGapPage, core.MaxGapPage)
	if err != nil {
		return nil, err
	}
	bound := gapCursorSelector(req.Root, sel)
	var sn *core.Snapshot
	after := ""
	if req.Params.Cursor != nil {
		cur, err := s.cursors.Decode(*req.Params.Cursor, core.Family(fam), bound)
		if err == nil {
			sn, err = s.broker.ResumeSnapshot(ctx, core.Family(fam), cur.Snapshot)
		}
		if err != nil {
			return nil, err
		}
		after = cur.After
	} else if sn, err = s.broker.HeldView(ctx, core.Family(fam)); err != nil {
		return nil, snapshotErr(err)
	}
	desired, dmore, err := s.fleet.NamePage(ctx, fam, req.Root, after, limit)
	if err != nil {
		return nil, s.fleetErr(ctx, "gap", err)
	}
	end := ""
	if dmore {
		end = desired[len(desired)-1]
	}
	live, lmore := sn.LiveNames(sel, after, end, limit)
	if lmore {
		end = live[len(live)-1]
		for len(desired) > 0 && desired[len(desired)-1] > end {
			desired = desired[:len(desired)-1]
		}
	}
	missing, orphans := fleetstore.Plan(desired, live)
	out := api.FleetGap200JSONResponse{Missing: missing, Orphans: orphans, Revision: int64(sn.Revision)}
	if end != "" {
		if sn.ID == 0 {
			if sn, err = s.broker.Retain(ctx, sn, snapshotOwner(callerFrom(ctx))); err != nil {
				return nil, muster.Errorf(muster.CodeInventoryUnavailable, "no inventory snapshot could be kept")
			}
		}
		next := s.cursors.Encode(core.Cursor{Epoch: s.broker.Epoch(), Family: core.Family(fam), Selector: bound, Snapshot: sn.ID, After: end})
		out.NextCursor = &next
	}
	return out, nil
}

// gapCursorSelector binds a gap cursor to its root and live selector, in a
// namespace no lease selector or spec listing uses.
func gapCursorSelector(root string, live core.Selector) string {
	return "gap:" + root + " " + live.String()
}

// appendRow appends {"name":…,"spec":…} with the spec's stored bytes as they
// are. A stored value that is not valid UTF-8 JSON (a hand-edited row: the
// broker never stores one) is sent as null and logged, so the answer stays
// JSON; a sweep drops such a row.
func (s *Server) appendRow(b []byte, r fleetstore.Row) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, r.Name)
	b = append(b, `,"spec":`...)
	if json.Valid(r.Spec) && utf8.Valid(r.Spec) {
		b = append(b, r.Spec...)
	} else {
		s.log.Warn("fleet store holds a spec that is not valid JSON; sent as null", "name", r.Name)
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// rawJSON is a JSON answer written byte for byte: it implements the
// generated response interfaces of the operations that return specs.
type rawJSON struct {
	status int
	body   []byte
}

func (r rawJSON) write(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	_, err := w.Write(append(r.body, '\n'))
	return err
}

func (r rawJSON) VisitRegisterSpecResponse(w http.ResponseWriter) error { return r.write(w) }
func (r rawJSON) VisitGetSpecResponse(w http.ResponseWriter) error      { return r.write(w) }
func (r rawJSON) VisitListSpecsResponse(w http.ResponseWriter) error    { return r.write(w) }
