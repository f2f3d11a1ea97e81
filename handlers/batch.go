package handlers

import (
	"context"
	"fmt"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// BatchBodyLimit bounds the body of a batch: 256 operations of the longest
// route with every member, and room for whitespace.
const BatchBodyLimit = 256 << 10

// BatchLeases is the strict-interface form of the batch operation. The
// router serves batchHTTP instead (one-pass decoding and encoding, see
// batch_http.go); both apply a batch with applyBatch.
func (s *Server) BatchLeases(ctx context.Context, req api.BatchLeasesRequestObject) (api.BatchLeasesResponseObject, error) {
	out, err := s.applyBatch(ctx, req.Body)
	if err != nil {
		return nil, err
	}
	return api.BatchLeases200JSONResponse(out), nil
}

// applyBatch applies up to core.MaxBatchOps lease operations of one
// session in one actor step. A malformed operation refuses the whole
// batch before anything is applied; an operation the caller's grants do
// not cover fails alone with forbidden.
func (s *Server) applyBatch(ctx context.Context, body *api.BatchRequest) (api.BatchResponse, error) {
	id, err := core.ParseSessionID(body.SessionId)
	if err != nil {
		return api.BatchResponse{}, err
	}
	caller := callerFrom(ctx)
	ops, err := batchOps(body.Ops, caller.Grants)
	if err != nil {
		return api.BatchResponse{}, err
	}
	res, rev, err := s.broker.Batch(ctx, caller.Family, id, ops)
	if err != nil {
		return api.BatchResponse{}, err
	}
	out := api.BatchResponse{Results: make([]api.BatchResult, len(res)), Revision: int64(rev)}
	for i, r := range res {
		out.Results[i] = batchResult(&body.Ops[i], ops[i].Route, r)
	}
	return out, nil
}

// batchOps turns the operations of a request into core operations: every
// operation's members must be those its kind takes, and its route an exact
// route. The first malformed operation refuses the whole batch, naming its
// index. An operation whose route no write grant covers is kept with its
// refusal (forbidden), so that it fails alone.
func batchOps(in []api.BatchOp, grants core.Grants) ([]core.BatchOp, error) {
	if len(in) == 0 || len(in) > core.MaxBatchOps {
		return nil, core.Errorf(core.CodeInvalidRequest, "a batch has 1..%d operations", core.MaxBatchOps)
	}
	ops := make([]core.BatchOp, len(in))
	for i := range in {
		op, err := batchOp(&in[i])
		if err != nil {
			return nil, batchOpError(i, err)
		}
		if !grants.AllowsLease(op.Route.Selector(), core.Write) {
			op.Refused = errForbidden
		}
		ops[i] = op
	}
	return ops, nil
}

// batchOp checks one operation's members against its kind.
func batchOp(in *api.BatchOp) (core.BatchOp, error) {
	var op core.BatchOp
	var needTTL, needToken bool
	switch in.Op {
	case api.Acquire:
		op.Kind, needTTL = core.BatchAcquire, true
	case api.Extend:
		op.Kind, needTTL, needToken = core.BatchExtend, true, true
	case api.Release:
		op.Kind, needToken = core.BatchRelease, true
	default:
		return op, core.Errorf(core.CodeInvalidRequest, "op must be acquire, extend or release")
	}
	if err := member("ttl_ms", in.TtlMs != nil, needTTL, op.Kind); err != nil {
		return op, err
	}
	if err := member("fencing_token", in.FencingToken != nil, needToken, op.Kind); err != nil {
		return op, err
	}
	if needTTL {
		op.TTL = millis(*in.TtlMs)
	}
	if needToken {
		if *in.FencingToken < 1 {
			return op, core.Errorf(core.CodeInvalidRequest, "fencing_token must be at least 1")
		}
		op.Token = uint64(*in.FencingToken)
	}
	r, err := core.ParseRoute(in.Route)
	if err != nil {
		return op, err
	}
	op.Route = r
	return op, nil
}

// member checks that a member is present exactly when the kind takes it.
func member(name string, present, needed bool, kind core.BatchKind) error {
	switch {
	case needed && !present:
		return core.Errorf(core.CodeInvalidRequest, "%s needs %s", kind, name)
	case !needed && present:
		return core.Errorf(core.CodeInvalidRequest, "%s does not take %s", kind, name)
	}
	return nil
}

// batchOpError names the operation at fault, keeping the code and the
// message of the domain (which never repeat the input).
func batchOpError(i int, err error) error {
	e, ok := err.(*core.Error)
	if !ok {
		return err
	}
	return &core.Error{Code: e.Code, Message: fmt.Sprintf("ops/%d: %s", i, e.Message), Scope: e.Scope}
}

// batchResult is one operation's result on the wire.
// The route is echoed as sent: ParseRoute accepts only the canonical text.
func batchResult(in *api.BatchOp, r core.Route, res core.BatchResult) api.BatchResult {
	out := api.BatchResult{Op: in.Op, Route: in.Route, Ok: res.Err == nil}
	if res.Err != nil {
		code := core.ErrorCode(res.Err)
		status := code.HTTPStatus()
		detail := "internal error"
		if e, ok := res.Err.(*core.Error); ok {
			detail = e.Message
		}
		c := api.ErrorCode(code)
		out.Code, out.Status, out.Detail = &c, &status, &detail
		return out
	}
	if res.Holding.Item != nil {
		l := leaseBody(r, res.Holding)
		out.Lease = &l
	}
	return out
}
