package handlers

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// BatchBodyLimit bounds the body of a batch: 256 operations of the longest
// route with every member, and room for whitespace.
const BatchBodyLimit = 256 << 10

// wireOp is one operation of a batch body as sent: its kind and route, and
// which of ttl_ms and fencing_token it carried.
type wireOp struct {
	Op       api.BatchOpKind
	Route    string
	TTL      int64 // ttl_ms, when HasTTL
	Token    int64 // fencing_token, when HasToken
	HasTTL   bool
	HasToken bool
}

// wireOps is the operations of a body decoded by the generated decoder.
func wireOps(in []api.BatchOp) []wireOp {
	out := make([]wireOp, len(in))
	for i, op := range in {
		out[i] = wireOp{Op: op.Op, Route: op.Route}
		if op.TtlMs != nil {
			out[i].TTL, out[i].HasTTL = *op.TtlMs, true
		}
		if op.FencingToken != nil {
			out[i].Token, out[i].HasToken = *op.FencingToken, true
		}
	}
	return out
}

// BatchLeases is the strict-interface form of the batch operation. The
// router serves batchHTTP instead (one-pass decoding and encoding, see
// batch_http.go); both apply a batch with applyBatch.
func (s *Server) BatchLeases(ctx context.Context, req api.BatchLeasesRequestObject) (api.BatchLeasesResponseObject, error) {
	in := wireOps(req.Body.Ops)
	ops, res, rev, err := s.applyBatch(ctx, req.Body.SessionId, in, &batchScratch{})
	if err != nil {
		return nil, err
	}
	out := api.BatchResponse{Results: make([]api.BatchResult, len(res)), Revision: int64(rev)}
	for i, r := range res {
		out.Results[i] = batchResult(&in[i], ops[i].Route, r)
	}
	return api.BatchLeases200JSONResponse(out), nil
}

// applyBatch applies up to core.MaxBatchOps lease operations of one
// session in one actor step and returns the core operations, their results
// and the revision after the batch. A malformed operation refuses the whole
// batch before anything is applied (its values were judged against the
// contract while decoding: a ttl_ms outside LeaseTTL never reaches here);
// an operation the caller's grants do not cover fails alone with
// forbidden. The operations and results are written into sc's slices,
// which keep them (and grow) for the caller to recycle.
func (s *Server) applyBatch(ctx context.Context, session string, in []wireOp, sc *batchScratch) ([]core.BatchOp, []core.BatchResult, core.Revision, error) {
	id, err := core.ParseSessionID(session)
	if err != nil {
		return nil, nil, 0, err
	}
	caller := callerFrom(ctx)
	ops, err := appendBatchOps(sc.ops[:0], in, caller.Grants)
	sc.ops = ops
	if err != nil {
		return nil, nil, 0, err
	}
	ans, err := s.broker.Batch(ctx, core.BatchRequest{Family: caller.Family, Session: id, Ops: ops, Results: sc.res})
	if cap(ans.Results) > cap(sc.res) {
		sc.res = ans.Results
	}
	return ops, ans.Results, ans.Revision, err
}

// batchScratch is what applying one batch writes besides its answer: the
// core operations and their results, recycled across requests
// (batchScratches) once the answer is written.
type batchScratch struct {
	ops []core.BatchOp
	res []core.BatchResult
}

var batchScratches = sync.Pool{New: func() any { return &batchScratch{} }}

// recycle forgets what sc holds (routes, errors, Items) and pools it.
func (sc *batchScratch) recycle() {
	clear(sc.res[:min(len(sc.ops), cap(sc.res))])
	clear(sc.ops)
	sc.ops, sc.res = sc.ops[:0], sc.res[:0]
	batchScratches.Put(sc)
}

// batchOps turns the operations of a request into core operations: every
// operation's members must be those its kind takes, and its route an exact
// route. The first malformed operation refuses the whole batch, naming its
// index. An operation whose route no write grant covers is kept with its
// refusal (forbidden), so that it fails alone.
func batchOps(in []wireOp, grants core.Grants) ([]core.BatchOp, error) {
	return appendBatchOps(nil, in, grants)
}

// appendBatchOps is batchOps appending to dst.
func appendBatchOps(dst []core.BatchOp, in []wireOp, grants core.Grants) ([]core.BatchOp, error) {
	if len(in) == 0 || len(in) > core.MaxBatchOps {
		return dst, muster.Errorf(muster.CodeInvalidRequest, "a batch has 1..%d operations", core.MaxBatchOps)
	}
	dst = slices.Grow(dst, len(in))
	for i := range in {
		op, err := batchOp(&in[i])
		if err != nil {
			return dst, batchOpError(i, err)
		}
		if !grants.AllowsRoute(op.Route, core.Write) {
			op.Refused = errForbidden
		}
		dst = append(dst, op)
	}
	return dst, nil
}

// batchOp checks one operation's members against its kind.
func batchOp(in *wireOp) (core.BatchOp, error) {
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
		return op, muster.Errorf(muster.CodeInvalidRequest, "op must be acquire, extend or release")
	}
	if err := memberFor("ttl_ms", in.HasTTL, needTTL, op.Kind); err != nil {
		return op, err
	}
	if err := memberFor("fencing_token", in.HasToken, needToken, op.Kind); err != nil {
		return op, err
	}
	if needTTL {
		op.TTL = millis(in.TTL)
	}
	if needToken {
		if in.Token < 1 {
			return op, muster.Errorf(muster.CodeInvalidRequest, "fencing_token must be at least 1")
		}
		op.Token = core.FencingToken(in.Token)
	}
	r, err := core.ParseRoute(in.Route)
	if err != nil {
		return op, err
	}
	op.Route = r
	return op, nil
}

// memberFor checks that a member is present exactly when the kind takes it.
func memberFor(name string, present, needed bool, kind core.BatchKind) error {
	switch {
	case needed && !present:
		return muster.Errorf(muster.CodeInvalidRequest, "%s needs %s", kind, name)
	case !needed && present:
		return muster.Errorf(muster.CodeInvalidRequest, "%s does not take %s", kind, name)
	}
	return nil
}

// batchOpError names the operation at fault, keeping the code and the
// message of the domain (which never repeat the input).
func batchOpError(i int, err error) error {
	e, ok := err.(*muster.Error)
	if !ok {
		return err
	}
	return &muster.Error{Code: e.Code, Message: fmt.Sprintf("ops/%d: %s", i, e.Message), Scope: e.Scope}
}

// batchFailure is what a failed result says: its code, the status its own
// endpoint would answer, and the domain's message.
func batchFailure(err error) (muster.Code, int, string) {
	code := muster.ErrorCode(err)
	if e, ok := err.(*muster.Error); ok {
		return code, httpStatus(code), e.Message
	}
	return code, httpStatus(code), "internal error"
}

// batchResult is one operation's result as the generated type. The route
// is echoed as sent: ParseRoute accepts only the canonical text.
func batchResult(in *wireOp, r core.Route, res core.BatchResult) api.BatchResult {
	out := api.BatchResult{Op: in.Op, Route: in.Route, Ok: res.Err == nil}
	if res.Err != nil {
		code, status, detail := batchFailure(res.Err)
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
