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
	Token uint64        // extend and release
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

// Batch applies ops in order, in one step, on the leases of session id of
// family fam, and returns one result per op in the same order.
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
// its own: a TTL out of range fails that op with invalid_request.
func (s *State) Batch(now time.Time, fam string, id SessionID, ops []BatchOp) ([]BatchResult, error) {
	if len(ops) == 0 || len(ops) > MaxBatchOps {
		return nil, muster.Errorf(muster.CodeInvalidRequest, "a batch has 1..%d operations", MaxBatchOps)
	}
	for i := range ops {
		if ops[i].Kind < BatchAcquire || ops[i].Kind > BatchRelease {
			return nil, muster.Errorf(muster.CodeInvalidRequest, "operation %d has an unknown kind", i)
		}
	}
	if _, err := s.liveSession(now, fam, id); err != nil {
		return nil, err
	}
	out := make([]BatchResult, len(ops))
	for i := range ops {
		out[i] = s.applyBatchOp(now, fam, id, &ops[i])
	}
	return out, nil
}

// applyBatchOp applies one op exactly as its own command would.
func (s *State) applyBatchOp(now time.Time, fam string, id SessionID, op *BatchOp) BatchResult {
	if op.Refused != nil {
		return BatchResult{Err: op.Refused}
	}
	var r BatchResult
	switch op.Kind {
	case BatchAcquire:
		r.Holding, _, r.Err = s.Acquire(now, fam, id, op.Route, op.TTL, 0)
	case BatchExtend:
		r.Holding, r.Err = s.Extend(now, fam, id, op.Route, op.Token, op.TTL)
	case BatchRelease:
		r.Err = s.Release(now, fam, id, op.Route, op.Token)
	}
	return r
}

// Batch applies a batch in one actor step; see State.Batch. It also
// returns the revision right after the batch. As with Acquire, a fresh
// grant that cannot be handed over (ctx ended before the answer reached the
// caller) is rolled back: the grants of such a batch are undone in one
// further step, each with a RolledBack event; its extends and releases
// stand. The caller then gets ctx.Err().
func (b *Broker) Batch(ctx context.Context, fam string, id SessionID, ops []BatchOp) ([]BatchResult, uint64, error) {
	type answer struct {
		res []BatchResult
		rev uint64
	}
	a, err := call(ctx, b, func(s *State, now time.Time) (answer, error) {
		res, err := s.Batch(now, fam, id, ops)
		return answer{res, s.Revision()}, err
	})
	if err != nil || ctx.Err() == nil {
		return a.res, a.rev, err
	}
	_, _ = call(context.Background(), b, func(s *State, now time.Time) (struct{}, error) {
		for i, r := range a.res {
			if r.Err == nil && r.Holding.Outcome == OutcomeAcquired {
				s.Rollback(now, fam, id, ops[i].Route, r.Holding.Token)
			}
		}
		return struct{}{}, nil
	})
	return nil, 0, ctx.Err()
}
