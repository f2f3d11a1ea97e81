package core

import (
	"context"
	"time"

	"github.com/musterhq/muster"
)

// MaxBatchOps bounds the operations of one batch. The HTTP contract states
// the same number (BatchRequest.ops maxItems).
const MaxBatchOps = 256

// BatchKind is what one batch operation does.
type BatchKind uint8

// The batch operations: the exact lease mutations, acquisition without
// waiting.
const (
	BatchAcquire BatchKind = iota + 1 // Acquire with wait 0
	BatchExtend                       // Extend
	BatchRelease                      // Release
)

var batchKindNames = [...]string{"", "acquire", "extend", "release"}

func (k BatchKind) String() string {
	if int(k) < len(batchKindNames) {
		return batchKindNames[k]
	}
	return "unknown"
}

// BatchOp is one operation of a batch on the batch's session's leases.
type BatchOp struct {
	Kind  BatchKind
	Route Route
	TTL   time.Duration // acquire and extend
	Token FencingToken  // extend and release
	// Refused, when not nil, is the operation's outcome decided before the
	// batch reached the core (the caller's grants do not cover the route):
	// the operation is not applied and its result carries this error.
	Refused error
}

// BatchResult is the outcome of one operation: the holding after an
// acquire or an extend (zero after a release), or the error the same
// operation would have answered on its own.
type BatchResult struct {
	Holding Holding
	Err     error
}

// BatchRequest is a batch of Ops on the leases of Session of Family.
type BatchRequest struct {
	Family  Family
	Session SessionID
	Ops     []BatchOp
	// Results, when its capacity holds len(Ops), is where the results are
	// written (the answer's Results is then Results[:len(Ops)]), so that a
	// caller can recycle it; otherwise the results are allocated.
	Results []BatchResult
}

// BatchAnswer is a batch's outcome: one result per op, in the order of the
// ops, and the family's revision right after the batch (the broker revision
// in an unplaced core, epoch·2^32 + n in a placed one, as for every read).
type BatchAnswer struct {
	Results  []BatchResult
	Revision Revision
}

// Batch applies req.Ops in order, in one step, on the leases of the
// request's session, and returns one result per op in the same order, with
// the family's revision right after them.
//
// The contract: the step is exactly the same as applying each op on its own
// (Acquire with wait 0, Extend, Release) at the same now, one after the
// other. The state, the revision, the counters and the events (one per
// held-set change, in revision order, so watchers see the same changes)
// are those of the ops applied one by one; an op that fails changes
// nothing, and the ops after it still apply (partial success is normal).
//
// The batch as a whole fails, applying nothing, when it has no op or more
// than MaxBatchOps (invalid_request), when an op's kind is unknown
// (invalid_request), or when the session is not live in fam
// (session_not_found). Each op's own input is judged by the op itself, as on
// its own: a TTL out of range fails that op with invalid_request. (Over
// HTTP the contract bounds ttl_ms, and the edge refuses such a batch whole
// before it reaches the core.)
func (s *State) Batch(now time.Time, req BatchRequest) (BatchAnswer, error) {
	ops := req.Ops
	if len(ops) == 0 || len(ops) > MaxBatchOps {
		return BatchAnswer{}, muster.Errorf(muster.CodeInvalidRequest, "a batch has 1..%d operations", MaxBatchOps)
	}
	for i := range ops {
		if ops[i].Kind < BatchAcquire || ops[i].Kind > BatchRelease {
			return BatchAnswer{}, muster.Errorf(muster.CodeInvalidRequest, "operation %d has an unknown kind", i)
		}
	}
	ss, err := s.liveSession(now, req.Family, req.Session)
	if err != nil {
		return BatchAnswer{}, err
	}
	out := req.Results[:0]
	if cap(out) < len(ops) {
		out = make([]BatchResult, len(ops))
	}
	out = out[:len(ops)]
	f := s.families[req.Family]
	for i := range ops {
		if s.placeFull {
			// A change limit was reached: on its own, the next op would
			// first drop the family (dropDueFamilies), and so does this one.
			out[i] = s.applyBatchOp(now, req.Family, req.Session, &ops[i])
			continue
		}
		out[i] = s.applyBatchOpOf(now, req.Family, &f, ss, &ops[i])
	}
	return BatchAnswer{Results: out, Revision: s.famRevOf(req.Family)}, nil
}

// applyBatchOpOf applies one op of the live session ss of fam, whose
// record is *f (nil until a grant makes it), exactly as its own command
// would. The session
// and the family are looked up once per batch: each command on its own
// would first process due expiry and find the session again, and at the
// batch's one now that finds nothing new (whatever a batch grants or
// renews is due after now; no op ends a session or adds a waiter) and
// the same session, unless a placed family reached its change limit
// (Batch takes applyBatchOp then).
func (s *State) applyBatchOpOf(now time.Time, fam Family, f **family, ss *session, op *BatchOp) BatchResult {
	if op.Refused != nil {
		return BatchResult{Err: op.Refused}
	}
	var r BatchResult
	switch op.Kind {
	case BatchAcquire:
		if r.Err = checkLeaseTTL(op.TTL); r.Err == nil {
			if *f == nil {
				*f = s.family(fam)
			}
			r.Holding, _, r.Err = s.acquire(now, *f, ss, op.Route, op.TTL, 0)
		}
	case BatchExtend:
		if r.Err = checkLeaseTTL(op.TTL); r.Err == nil {
			var l *lease
			if l, r.Err = s.heldBy(*f, ss, op.Route, op.Token); r.Err == nil {
				r.Holding, r.Err = s.extend(now, l, op.TTL)
			}
		}
	case BatchRelease:
		var l *lease
		if l, r.Err = s.heldBy(*f, ss, op.Route, op.Token); r.Err == nil && l != nil {
			s.release(now, l)
		}
	}
	return r
}

// applyBatchOp applies one op exactly as its own command would.
func (s *State) applyBatchOp(now time.Time, fam Family, id SessionID, op *BatchOp) BatchResult {
	if op.Refused != nil {
		return BatchResult{Err: op.Refused}
	}
	var r BatchResult
	switch op.Kind {
	case BatchAcquire:
		r.Holding, _, r.Err = s.Acquire(now, AcquireRequest{Family: fam, Session: id, Route: op.Route, TTL: op.TTL})
	case BatchExtend:
		r.Holding, r.Err = s.Extend(now, ExtendRequest{Family: fam, Session: id, Route: op.Route, Token: op.Token, TTL: op.TTL})
	case BatchRelease:
		r.Err = s.Release(now, ReleaseRequest{Family: fam, Session: id, Route: op.Route, Token: op.Token})
	}
	return r
}

// Batch applies a batch in one actor step; see State.Batch. As with
// Acquire, a fresh
// grant that cannot be handed over (ctx ended before the answer reached the
// caller) is rolled back: the grants of such a batch are undone in one
// further step, each with a RolledBack event; its extends and releases
// stand. The caller then gets ctx.Err().
func (b *Broker) Batch(ctx context.Context, req BatchRequest) (BatchAnswer, error) {
	a, err := callFam(ctx, b, req.Family, func(s *State, now time.Time) (BatchAnswer, error) {
		return s.Batch(now, req)
	})
	if err != nil || ctx.Err() == nil {
		return a, err
	}
	_, _ = call(context.Background(), b, func(s *State, now time.Time) (struct{}, error) {
		for i, r := range a.Results {
			if r.Err == nil && r.Holding.Outcome == OutcomeAcquired {
				s.Rollback(now, ReleaseRequest{Family: req.Family, Session: req.Session, Route: req.Ops[i].Route, Token: r.Holding.Token})
			}
		}
		return struct{}{}, nil
	})
	return BatchAnswer{}, ctx.Err()
}
