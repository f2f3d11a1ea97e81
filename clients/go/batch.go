package muster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// MaxBatchOps is the most operations one batch may carry (the contract's
// BatchRequest.ops maxItems).
const MaxBatchOps = 256

// Batch collects lease operations of one session — acquisitions (which never
// wait), extensions and releases — to be applied by the broker in one
// request and one step, in the order they were added. Build it with
// Session.Batch, send it with Do. A Batch is not safe for concurrent use.
//
// It is what a worker uses to take its share of many routes at start, and
// to renew hundreds of leases with one request per interval.
type Batch struct {
	s   *Session
	ops []batchEntry
	err error // the first local refusal; Do returns it
}

type batchEntry struct {
	op    api.BatchOpKind
	route route
	ttl   time.Duration
	lease *Lease // extend and release
}

// BatchResult is the outcome of one operation of a batch, in the order of
// the batch. Err is nil on success; otherwise it is what the operation on
// its own (Session.Acquire, Lease.Extend, Lease.Release) would have
// returned: an *Error with the broker's code for that operation
// (errors.Is(r.Err, ErrLeaseHeld), Advice(r.Err)), or the lease's loss.
type BatchResult struct {
	Op    string // "acquire", "extend" or "release"
	Route string
	// Lease is the handle: after a successful acquire the new handle (or
	// the same one, when this session already held the route); for an
	// extend or a release the lease it was given. Nil after a failed
	// acquire.
	Lease *Lease
	Err   error
}

// Batch starts an empty batch on the session's leases.
func (s *Session) Batch() *Batch { return &Batch{s: s} }

// Len is the number of operations added so far.
func (b *Batch) Len() int { return len(b.ops) }

// Acquire adds an acquisition of the exact route for ttl (100 ms .. 10 min).
// It never waits: when another session holds the route, its result is
// ErrLeaseHeld.
func (b *Batch) Acquire(routeStr string, ttl time.Duration) *Batch {
	r, err := parseRoute(routeStr)
	if err != nil {
		b.refuse(err)
	}
	return b.add(batchEntry{op: api.Acquire, route: r, ttl: ttl})
}

// Extend adds an extension of l to now + ttl, as Lease.Extend.
func (b *Batch) Extend(l *Lease, ttl time.Duration) *Batch {
	if b.own(l) {
		b.add(batchEntry{op: api.Extend, route: l.r, ttl: ttl, lease: l})
	}
	return b
}

// Release adds a release of l, as Lease.Release.
func (b *Batch) Release(l *Lease) *Batch {
	if b.own(l) {
		b.add(batchEntry{op: api.Release, route: l.r, lease: l})
	}
	return b
}

func (b *Batch) add(e batchEntry) *Batch {
	if len(b.ops) == MaxBatchOps {
		b.refuse(&Error{Code: ErrInvalidRequest.Code, Detail: fmt.Sprintf("a batch has at most %d operations", MaxBatchOps)})
	}
	b.ops = append(b.ops, e)
	return b
}

// own checks that l is a lease of the batch's session.
func (b *Batch) own(l *Lease) bool {
	if l == nil || l.s != b.s {
		b.refuse(&Error{Code: ErrInvalidRequest.Code, Detail: "a batch takes only leases of its own session"})
		return false
	}
	return true
}

func (b *Batch) refuse(err error) {
	if b.err == nil {
		b.err = err
	}
}

// Do sends the batch and returns one result per operation, in order.
//
// Do fails as a whole, and nothing was applied, when the batch was refused
// locally (no operation, more than MaxBatchOps, a malformed route, a lease
// of another session: ErrInvalidRequest or ErrInvalidRoute) or by the
// broker (ErrSessionNotFound: the session's leases are then lost, as with
// Lease.Extend). On a transport error or a cancelled ctx nothing is known:
// the leases stay as they were (retry before their deadline), and grants
// the broker made for a request that left are rolled back by the broker.
//
// Operations on leases that are already known to be lost are not sent:
// their results are what Extend and Release would return (Err, and nil for
// a release).
func (b *Batch) Do(ctx context.Context) ([]BatchResult, error) {
	if b.err != nil {
		return nil, b.err
	}
	if len(b.ops) == 0 {
		return nil, &Error{Code: ErrInvalidRequest.Code, Detail: "a batch has at least one operation"}
	}
	if err := b.s.Err(); err != nil {
		return nil, err
	}
	out := make([]BatchResult, len(b.ops))
	body := api.BatchRequest{SessionId: b.s.id}
	sent := make([]int, 0, len(b.ops)) // index in b.ops of each operation sent
	for i, e := range b.ops {
		out[i] = BatchResult{Op: string(e.op), Route: e.route.String(), Lease: e.lease}
		if done, err := e.settledLocally(); done {
			out[i].Err = err
			continue
		}
		op := api.BatchOp{Op: e.op, Route: e.route.String()}
		if e.op != api.Release {
			ms := e.ttl.Milliseconds()
			op.TtlMs = &ms
		}
		if e.lease != nil {
			tok := e.lease.token
			op.FencingToken = &tok
		}
		body.Ops = append(body.Ops, op)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return out, nil
	}
	t0 := time.Now()
	var resp api.BatchResponse
	raw, err := b.s.c.raw.BatchLeases(ctx, body)
	if err := b.s.call(raw, err, 200, &resp); err != nil {
		if errors.Is(err, ErrSessionNotFound) {
			for _, i := range sent {
				if l := b.ops[i].lease; l != nil {
					l.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
				}
			}
		}
		b.s.notFound(err)
		return nil, err
	}
	if len(resp.Results) != len(sent) {
		return nil, fmt.Errorf("muster: the broker answered %d results for %d operations", len(resp.Results), len(sent))
	}
	for k, i := range sent {
		out[i] = b.settle(b.ops[i], &resp.Results[k], t0, out[i])
	}
	return out, nil
}

// settledLocally reports whether the operation's outcome is already known
// without asking the broker, as Lease.Extend and Lease.Release know it.
func (e *batchEntry) settledLocally() (bool, error) {
	if e.lease == nil {
		return false, nil
	}
	lerr := e.lease.Err()
	switch {
	case e.op == api.Extend && lerr != nil:
		return true, lerr
	case e.op == api.Release && lerr != nil:
		return true, nil
	case e.op == api.Release && e.lease.s.Err() != nil:
		// The broker released it when the session ended.
		e.lease.end(fmt.Errorf("%w: %w", ErrLeaseLost, e.lease.s.Err()))
		return true, nil
	}
	return false, nil
}

// settle applies one broker result to the SDK's handles, as the single
// operation would.
func (b *Batch) settle(e batchEntry, r *api.BatchResult, t0 time.Time, out BatchResult) BatchResult {
	var err error
	if !r.Ok {
		err = resultError(r)
	}
	switch e.op {
	case api.Acquire:
		if err == nil && r.Lease != nil {
			out.Lease = b.s.adopt(e.route, r.Lease, t0, e.ttl)
		}
		out.Err = err
	case api.Extend:
		switch {
		case err == nil && r.Lease != nil:
			out.Err = e.lease.extended(r.Lease, t0, e.ttl)
		case ownershipGone(err):
			e.lease.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
			out.Err = e.lease.Err()
		default:
			out.Err = err
		}
	case api.Release:
		switch {
		case err == nil:
			e.lease.end(ErrReleased)
		case ownershipGone(err):
			e.lease.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		default:
			out.Err = err
		}
	}
	return out
}

// resultError is the *Error of a failed result, as a problem body with the
// same code would make it.
func resultError(r *api.BatchResult) error {
	e := &Error{Code: ErrInternal.Code}
	if r.Code != nil {
		e.Code = Code(*r.Code)
	}
	if r.Status != nil {
		e.Status = *r.Status
		e.Title = http.StatusText(*r.Status)
	}
	if r.Detail != nil {
		e.Detail = *r.Detail
	}
	return e
}
