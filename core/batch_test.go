package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

func TestBatchPartialSuccess(t *testing.T) {
	f := newLeaseFixture(t, 1, 2)
	other := f.mustAcquire(2, rB)
	f.events()
	mine := f.mustAcquire(1, rA)
	f.events()
	f.now = f.now.Add(time.Second)
	forbidden := muster.Errorf(muster.CodeForbidden, "no grant covers this request")
	rC := Route{"acme", "renderers", "doc-3"}
	ops := []BatchOp{
		{Kind: BatchExtend, Route: rA, Token: mine.Token, TTL: 20 * time.Second},
		{Kind: BatchAcquire, Route: rB, TTL: time.Second},                       // held by 2
		{Kind: BatchRelease, Route: rB, Token: other.Token},                     // not the owner
		{Kind: BatchAcquire, Route: rC, TTL: time.Second},                       // free
		{Kind: BatchAcquire, Route: rA, TTL: time.Second},                       // already held
		{Kind: BatchExtend, Route: rA, Token: mine.Token + 1, TTL: time.Second}, // fenced
		{Kind: BatchAcquire, Route: rC, TTL: time.Second, Refused: forbidden},
		{Kind: BatchAcquire, Route: rC, TTL: time.Hour},                   // invalid ttl
		{Kind: BatchRelease, Route: rC, Token: mine.Token},                // fenced: rC's token is newer
		{Kind: BatchRelease, Route: Route{"acme", "x", "free"}, Token: 1}, // not held: success
	}
	ans, err := f.s.Batch(f.now, BatchRequest{Family: "acme", Session: sid(1), Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	res := ans.Results
	want := []muster.Code{"", muster.CodeLeaseHeld, muster.CodeNotOwner, "", "", muster.CodeFenced, muster.CodeForbidden, muster.CodeInvalidRequest, muster.CodeFenced, ""}
	for i, r := range res {
		got := muster.Code("")
		if r.Err != nil {
			got = muster.ErrorCode(r.Err)
		}
		if got != want[i] {
			t.Errorf("op %d (%s): code %q, want %q (%v)", i, ops[i].Kind, got, want[i], r.Err)
		}
	}
	if h := res[0].Holding; h.Token != mine.Token || h.Item.Renewals() != 1 || !h.Item.ExpiresAt().Equal(f.now.Add(20*time.Second)) {
		t.Errorf("extend = %+v", h.Item)
	}
	if res[3].Holding.Outcome != OutcomeAcquired || res[4].Holding.Outcome != OutcomeAlreadyHeld {
		t.Errorf("outcomes %v %v", res[3].Holding.Outcome, res[4].Holding.Outcome)
	}
	// Only the grant of rC changed the held set; the extend moved the revision.
	wantEvents(t, f.events(), fmt.Sprintf("acquired acme/renderers/doc-3@%d", res[3].Holding.Token))
	if res[3].Holding.Token != mine.Token+2 {
		t.Errorf("token of the grant %d, want %d (after the extend's revision)", res[3].Holding.Token, mine.Token+2)
	}
}

func TestBatchRefusedWhole(t *testing.T) {
	f := newLeaseFixture(t, 1)
	op := BatchOp{Kind: BatchAcquire, Route: rA, TTL: time.Second}
	many := make([]BatchOp, MaxBatchOps+1)
	for i := range many {
		many[i] = op
	}
	cases := []struct {
		name string
		id   SessionID
		fam  Family
		ops  []BatchOp
		code muster.Code
	}{
		{"Empty", sid(1), "acme", nil, muster.CodeInvalidRequest},
		{"TooMany", sid(1), "acme", many, muster.CodeInvalidRequest},
		{"UnknownKind", sid(1), "acme", []BatchOp{op, {Kind: 9, Route: rB}}, muster.CodeInvalidRequest},
		{"NoSession", sid(7), "acme", []BatchOp{op}, muster.CodeSessionNotFound},
		{"OtherFamily", sid(1), "beta", []BatchOp{op}, muster.CodeSessionNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rev := f.s.Revision()
			res, err := f.s.Batch(f.now, BatchRequest{Family: c.fam, Session: c.id, Ops: c.ops})
			wantCode(t, err, c.code)
			if res.Results != nil || f.s.Revision() != rev || len(f.events()) != 0 {
				t.Fatalf("a refused batch changed something: res %v, revision %d → %d", res, rev, f.s.Revision())
			}
		})
	}
	if got := len(many[:MaxBatchOps]); got != MaxBatchOps {
		t.Fatal(got)
	}
	if _, err := f.s.Batch(f.now, BatchRequest{Family: "acme", Session: sid(1), Ops: many[:MaxBatchOps]}); err != nil {
		t.Fatalf("a batch of exactly %d: %v", MaxBatchOps, err)
	}
}

// A batch is the same ops applied one by one: on two states fed the same
// random history, one taking each batch in one call and the other op by op,
// every result, every event, the revision and the counters agree.
func TestBatchEqualsOneByOne(t *testing.T) {
	var granted uint64 // grants to waiters, across the histories
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkBatchEqualsOneByOne(t, seed, &granted) })
	}
	if granted == 0 {
		t.Fatal("no history granted a lease to a waiter")
	}
}

func checkBatchEqualsOneByOne(t *testing.T, seed uint64, granted *uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{Epoch: "e", IncarnationKey: []byte("k")}
	batched, single := NewState(cfg), NewState(cfg)
	now := t0
	const sessions = 3
	for i := byte(1); i <= sessions; i++ {
		for _, s := range []*State{batched, single} {
			if _, err := s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(i), OwnerID: fmt.Sprint("w", i), TTL: 5 * time.Second}); err != nil {
				t.Fatal(err)
			}
		}
	}
	routes := make([]Route, 8)
	for i := range routes {
		routes[i] = Route{"acme", "a", fmt.Sprint("r", i)}
	}
	tokens := []FencingToken{0}      // tokens seen, so extends and releases are often right
	last := map[Route]FencingToken{} // the latest token granted on each route
	held := map[BatchKind]int{}      // ops that succeeded with a holding, by kind
	for step := 0; step < 60; step++ {
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
		if rng.IntN(3) == 0 { // sessions are kept alive, or not
			who := sid(byte(1 + rng.IntN(sessions)))
			batched.Keepalive(now, "acme", who)
			single.Keepalive(now, "acme", who)
		}
		if rng.IntN(3) == 0 { // a session queues for a route, so releases grant to waiters
			req := AcquireRequest{Family: "acme", Session: sid(byte(1 + rng.IntN(sessions))), Route: routes[rng.IntN(len(routes))],
				TTL: time.Second, Wait: time.Duration(1+rng.IntN(800)) * time.Millisecond}
			h1, t1, e1 := batched.Acquire(now, req)
			h2, t2, e2 := single.Acquire(now, req)
			if g, w := fmt.Sprint(describeResult(BatchResult{h1, e1}), t1), fmt.Sprint(describeResult(BatchResult{h2, e2}), t2); g != w {
				t.Fatalf("step %d: acquire with wait %s, %s", step, g, w)
			}
			if h1.Token != 0 {
				last[req.Route] = h1.Token
			}
		}
		who := sid(byte(1 + rng.IntN(sessions+1))) // sometimes no such session
		ops := make([]BatchOp, 1+rng.IntN(12))
		for i := range ops {
			ops[i] = BatchOp{
				Kind:  BatchKind(1 + rng.IntN(3)),
				Route: routes[rng.IntN(len(routes))],
				TTL:   []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second, 3 * time.Second}[rng.IntN(4)],
				Token: tokens[rng.IntN(len(tokens))],
			}
			if tok, ok := last[ops[i].Route]; ok && rng.IntN(4) != 0 {
				ops[i].Token = tok // most often the route's latest grant
			}
			if rng.IntN(15) == 0 {
				ops[i].Refused = muster.Errorf(muster.CodeForbidden, "no grant covers this request")
			}
		}
		ans, gerr := batched.Batch(now, BatchRequest{Family: "acme", Session: who, Ops: ops})
		got := ans.Results
		var want []BatchResult
		var werr error
		if _, err := single.liveSession(now, "acme", who); err != nil {
			werr = err
		} else {
			for i := range ops {
				want = append(want, single.applyOne(now, "acme", who, ops[i]))
			}
		}
		if muster.ErrorCode(gerr) != muster.ErrorCode(werr) || (gerr == nil) != (werr == nil) {
			t.Fatalf("step %d: batch err %v, one by one %v", step, gerr, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: %d results, want %d", step, len(got), len(want))
		}
		for i := range got {
			if g, w := describeResult(got[i]), describeResult(want[i]); g != w {
				t.Fatalf("step %d op %d (%s): batch %s, one by one %s", step, i, ops[i].Kind, g, w)
			}
			if got[i].Holding.Token != 0 {
				tokens = append(tokens, got[i].Holding.Token)
				last[ops[i].Route] = got[i].Holding.Token
				held[ops[i].Kind]++
			}
		}
		if g, w := describeEvents(batched.TakeEvents()), describeEvents(single.TakeEvents()); g != w {
			t.Fatalf("step %d: batch events %s, one by one %s", step, g, w)
		}
		if g, w := describeWaits(batched.TakeResults()), describeWaits(single.TakeResults()); g != w {
			t.Fatalf("step %d: batch wait results %s, one by one %s", step, g, w)
		}
		gs, ws := batched.Stats(), single.Stats()
		if fmt.Sprint(gs) != fmt.Sprint(ws) {
			t.Fatalf("step %d: stats differ:\nbatch %+v\nsingle %+v", step, gs, ws)
		}
	}
	// The history must exercise the paths that change state.
	if st := batched.Stats(); held[BatchAcquire] == 0 || held[BatchExtend] == 0 || st.Releases == 0 {
		t.Fatalf("a history without grants, extends or releases: %v, releases %d", held, st.Releases)
	}
	*granted += batched.Stats().AcquireGrantedAfterWait
}

// applyOne is the op applied as its own command, the way the broker's
// typed methods apply it (Refused ops never reach the core).
func (s *State) applyOne(now time.Time, fam Family, id SessionID, op BatchOp) BatchResult {
	if op.Refused != nil {
		return BatchResult{Err: op.Refused}
	}
	switch op.Kind {
	case BatchAcquire:
		h, ticket, err := s.Acquire(now, AcquireRequest{Family: fam, Session: id, Route: op.Route, TTL: op.TTL})
		if ticket != 0 {
			panic("wait 0 queued")
		}
		return BatchResult{Holding: h, Err: err}
	case BatchExtend:
		h, err := s.Extend(now, ExtendRequest{Family: fam, Session: id, Route: op.Route, Token: op.Token, TTL: op.TTL})
		return BatchResult{Holding: h, Err: err}
	default:
		return BatchResult{Err: s.Release(now, ReleaseRequest{Family: fam, Session: id, Route: op.Route, Token: op.Token})}
	}
}

func describeResult(r BatchResult) string {
	if r.Err != nil {
		return "err " + string(muster.ErrorCode(r.Err))
	}
	if r.Holding.Item == nil {
		return "ok"
	}
	return fmt.Sprintf("ok %s token %d outcome %d %+v", r.Holding.Item.Key(), r.Holding.Token, r.Holding.Outcome, *r.Holding.Item)
}

func describeWaits(res []WaitResult) string {
	out := ""
	for _, r := range res {
		out += fmt.Sprintf("%d %s;", r.Ticket, describeResult(BatchResult{Holding: r.Grant, Err: r.Err}))
	}
	return out
}

func describeEvents(ev []Event) string {
	out := ""
	for _, e := range ev {
		out += fmt.Sprintf("%s %s %s@%d;", e.Family, e.Kind, e.Key, e.Revision)
		if e.Item != nil {
			out += fmt.Sprintf("%+v;", *e.Item)
		}
	}
	return out
}

// The actor applies a batch in one step: the sink sees all its events in
// one call, and a session's batch needs no other command.
func TestBrokerBatchOneStep(t *testing.T) {
	var steps [][]ChangeKind
	b := newTestBroker(t, func(ev []Event) {
		var k []ChangeKind
		for _, e := range ev {
			k = append(k, e.Kind)
		}
		steps = append(steps, k)
	})
	ctx := context.Background()
	if _, err := b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ans, err := b.Batch(ctx, BatchRequest{Family: "acme", Session: sid(1), Ops: []BatchOp{
		{Kind: BatchAcquire, Route: rA, TTL: time.Minute},
		{Kind: BatchAcquire, Route: rB, TTL: time.Minute},
	}})
	res := ans.Results
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatal(err, res)
	}
	if _, err := b.Batch(ctx, BatchRequest{Family: "acme", Session: sid(1), Ops: []BatchOp{
		{Kind: BatchRelease, Route: rA, Token: res[0].Holding.Token},
		{Kind: BatchRelease, Route: rB, Token: res[1].Holding.Token},
	}}); err != nil {
		t.Fatal(err)
	}
	b.Stats(ctx) // one more step: the sink has run for both batches
	want := "[[acquired acquired] [released released]]"
	if got := fmt.Sprint(steps); got != want {
		t.Fatalf("events by step %s, want %s", got, want)
	}
}

// A batch whose caller left before the answer is rolled back like an
// undeliverable single grant: its grants end with rolled_back.
func TestBrokerBatchRollsBackUndeliverableGrants(t *testing.T) {
	var kinds []ChangeKind
	b := newTestBroker(t, func(ev []Event) {
		for _, e := range ev {
			kinds = append(kinds, e.Kind)
		}
	})
	ctx := context.Background()
	b.CreateSession(ctx, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "a", TTL: time.Minute})
	cctx, cancel := context.WithCancel(ctx)
	// Cancel inside the actor step, before the batch that follows runs:
	// the batch is enqueued, applied, and its answer has nobody to reach.
	done := make(chan error, 1)
	hold, holding := make(chan struct{}), make(chan struct{})
	go b.Exec(ctx, func(*State, time.Time) error { close(holding); <-hold; return nil })
	<-holding // the actor is busy until hold closes
	go func() {
		_, err := b.Batch(cctx, BatchRequest{Family: "acme", Session: sid(1), Ops: []BatchOp{{Kind: BatchAcquire, Route: rA, TTL: time.Minute}}})
		done <- err
	}()
	for len(b.cmds) == 0 { // the batch is enqueued behind the held step
		time.Sleep(time.Millisecond)
	}
	cancel()
	close(hold)
	// The command channel is buffered: the batch was enqueued at once.
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	st, _ := b.Query(ctx, "acme", rA)
	if st.Item != nil {
		t.Fatal("the undeliverable grant was kept")
	}
	if fmt.Sprint(kinds) != fmt.Sprint([]ChangeKind{Acquired, RolledBack}) {
		t.Fatalf("events %v", kinds)
	}
}

// A placed family that reaches its change limit in the middle of a batch
// is dropped before the next op, as it would be between two commands: the
// ops after it find no session, exactly as one by one.
func TestBatchChangeLimitMidBatch(t *testing.T) {
	now := time.Unix(1000, 0)
	ops := []BatchOp{
		{Kind: BatchAcquire, Route: rA, TTL: time.Second},
		{Kind: BatchAcquire, Route: rB, TTL: time.Second},
		{Kind: BatchRelease, Route: rA, Token: 1},
	}
	var got [2][]string
	for k := range got {
		s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k"), Placed: true})
		if err := s.Serve(now, "acme", 1, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateSession(now, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.families["acme"].place.changes = familyChangesLimit - 1
		var res []BatchResult
		if k == 0 {
			ans, err := s.Batch(now, BatchRequest{Family: "acme", Session: sid(1), Ops: ops})
			if err != nil {
				t.Fatal(err)
			}
			res = ans.Results
		} else {
			for _, op := range ops {
				res = append(res, s.applyOne(now, "acme", sid(1), op))
			}
		}
		for _, r := range res {
			got[k] = append(got[k], describeResult(r))
		}
		got[k] = append(got[k], describeEvents(s.TakeEvents()))
	}
	if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
		t.Fatalf("batch %q\none by one %q", got[0], got[1])
	}
	if got[0][1] != "err "+string(muster.CodeSessionNotFound) {
		t.Fatalf("the op after the limit: %s, want session_not_found", got[0][1])
	}
}
