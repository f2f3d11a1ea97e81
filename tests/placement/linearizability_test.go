package placement

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/musterhq/muster/tests/leasemodel"
)

// linRun is one client's view of the cluster in the linearizability test.
type linRun struct {
	routes    []string
	sessions  atomic.Int64 // session numbers, unique in the history
	mu        sync.Mutex
	history   []porcupine.Operation
	killAt    time.Time // before the owner was killed or cut
	deadAt    time.Time // after the process was reaped (a kill)
	killed    atomic.Bool
	crash     bool // the owner is killed: requests in flight get no answer
	resources []fencedStore
}

// Porcupine across a failover: clients acquire, extend, release and query a
// few routes of one family on its owner, the owner fails and the clients go
// on against the broker that takes over. The history is checked against
// the lease model with a Drop between the two serving periods: everything
// held before the failure is gone after it, the sessions of the old owner
// are not found on the new one, and every token granted after the takeover
// is above every token granted before it.
//
//   - kill -9: requests in flight at the kill have no answer; the model
//     lets them take effect or not, before the drop.
//   - a cut from PostgreSQL: the old owner keeps answering until its
//     deadline, then answers family_unavailable; every answer it gave must
//     fit before the drop, every answer of the new owner after it: an old
//     owner still granting once the new one served would not linearize.
//
// MUSTER_PLACEMENT_LONG=1 runs longer on each side.
func TestLinearizableAcrossFailover(t *testing.T) {
	phase := 1200 * time.Millisecond
	if os.Getenv("MUSTER_PLACEMENT_LONG") != "" {
		phase = 15 * time.Second
	}
	t.Run("kill", func(t *testing.T) { linearizableAcross(t, phase, true) })
	t.Run("cut", func(t *testing.T) { linearizableAcross(t, phase, false) })
}

func linearizableAcross(t *testing.T, phase time.Duration, crash bool) {
	const clients = 6
	c := newCluster(t, 2, "acme")
	a := c.waitSettled("acme", c.brokers, 15*time.Second)
	b := without(c.brokers, a)[0]
	run := &linRun{routes: []string{"lease://r/lin/0", "lease://r/lin/1", "lease://r/lin/2"}, crash: crash}
	run.resources = make([]fencedStore, len(run.routes))
	served := make(chan struct{}) // closed at the first answer of the new owner
	var servedOnce sync.Once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run.client(i, a, b, stop, func() { servedOnce.Do(func() { close(served) }) }); err != nil {
				errs <- err
			}
		}()
	}
	time.Sleep(phase)
	run.killAt = time.Now()
	run.killed.Store(true)
	if crash {
		a.kill9(t)
	} else {
		a.proxy.Cut()
	}
	run.deadAt = time.Now()
	select {
	case <-served:
	case <-time.After(15 * time.Second):
		t.Error("the new owner never answered")
	}
	time.Sleep(phase)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}

	history := run.finish(clients)
	// One placement epoch a period: the family changed hands at the kill
	// only (on a machine too loaded for the claim timing, an owner can
	// miss its deadline and drop the family: a failover the history does
	// not record, reported as such rather than as a porcupine failure).
	epochs := [2]map[uint64]int{{}, {}}
	for _, op := range history {
		in, out := op.Input.(leasemodel.Input), op.Output.(leasemodel.Output)
		if in.Kind != leasemodel.Drop && out.Status == 200 && out.Token != 0 {
			epochs[in.Epoch][uint64(out.Token)>>epochShift]++
		}
	}
	if len(epochs[0]) != 1 || len(epochs[1]) != 1 {
		t.Fatalf("placement epochs of the tokens before the kill %v, after %v: want one each (brokers' logs above)", epochs[0], epochs[1])
	}
	model := leasemodel.Model(len(run.routes))
	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	checked := time.Since(checkStart)
	var unknown, before, after int
	for _, op := range history {
		in, out := op.Input.(leasemodel.Input), op.Output.(leasemodel.Output)
		switch {
		case in.Kind == leasemodel.Drop:
		case out.Unknown:
			unknown++
		case in.Epoch == 0:
			before++
		default:
			after++
		}
	}
	t.Logf("%d operations answered by the old owner, %d in flight at the kill, %d answered by the new owner; porcupine: %s in %v",
		before, unknown, after, res, checked.Round(time.Millisecond))
	if before < 50 || after < 50 {
		t.Fatalf("too few operations on one side of the failover to check it: %d before, %d after", before, after)
	}
	if res != porcupine.Ok {
		run.explain(t, model, history)
		path := t.TempDir() + "/linearizability.html"
		if err := porcupine.VisualizePath(model, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("the history across the failover is not linearizable against the lease model (result %s)", res)
	}
	run.checkFenced(t)
}

// client runs one client until stop: operations on the owner a until it
// fails (no answer after a kill, family_unavailable after a cut; half the
// clients leave a at the failure), then on b, whose first answers to a's
// session must be session_not_found; then a new session on b.
func (r *linRun) client(id int, a, b *broker, stop chan struct{}, served func()) error {
	rng := rand.New(rand.NewPCG(uint64(id), 21))
	hc := &http.Client{Timeout: 5 * time.Second}
	base, epoch := a.url, 0
	sess, sessEpoch, sessNum := "", 0, 0
	tokens := make([]int64, len(r.routes))
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if epoch == 0 && id%2 == 1 && r.killed.Load() {
			// Half the clients move to b at once, so that b's answers
			// interleave with a's last ones: were a still serving once b
			// serves, the history would not linearize.
			base, epoch = b.url, 1
		}
		if sess == "" {
			s, ans, err := newSessionAs(base, "acme", fmt.Sprintf("client-%d", id))
			switch {
			case err == nil && s != "":
				sess, sessEpoch, sessNum = s, epoch, int(r.sessions.Add(1))
				clear(tokens)
			case epoch == 0 && r.killed.Load() && (err != nil || ans.status == 503 || ans.status == 421):
				base, epoch = b.url, 1 // the owner failed: on to the broker taking over
			case err == nil && (ans.status == 503 || ans.status == 421) || epoch == 1:
				time.Sleep(50 * time.Millisecond) // the takeover is not done yet
			default:
				return fmt.Errorf("client %d: session on the owner: %d %v %v", id, ans.status, ans.body, err)
			}
			continue
		}
		in := leasemodel.Random(rng, tokens, 200*time.Millisecond, 400*time.Millisecond)
		in.Client, in.Session, in.Epoch, in.SessionEpoch = id, sessNum, epoch, sessEpoch
		out, err := leasemodel.Call(hc, base, secret("acme"), r.routes[in.Route], sess, &in)
		switch {
		case err != nil && epoch == 0 && r.killed.Load() && r.crash:
			// The owner died with the request in flight: it may have
			// taken effect, before the death. Go on against b with the
			// same session: it must be unknown there.
			out = leasemodel.Output{Unknown: true, Owner: -1}
			r.record(id, in, out)
			base, epoch = b.url, 1
			continue
		case err != nil:
			return fmt.Errorf("client %d: %v on %s: %v", id, in.Kind, base, err)
		case out.Status == 421 || out.Status == 503:
			// Not served here now: nothing happened (a 421 or 503 is
			// answered before the core is touched).
			if epoch == 0 && r.killed.Load() {
				base, epoch = b.url, 1 // the cut owner stopped
			}
			time.Sleep(50 * time.Millisecond)
			continue
		case out.Status >= 500:
			return fmt.Errorf("client %d: %v on %s: %d %s", id, in.Kind, base, out.Status, out.Code)
		}
		if epoch == 1 {
			served()
		}
		r.record(id, in, out)
		if out.Status == 404 && out.Code == "session_not_found" {
			sess = ""
			continue
		}
		if out.Status == 200 && (in.Kind == leasemodel.Acquire || in.Kind == leasemodel.Extend) {
			tokens[in.Route] = out.Token
			r.resources[in.Route].writeBefore(id, uint64(out.Token), out.Exp)
		}
	}
}

func (r *linRun) record(id int, in leasemodel.Input, out leasemodel.Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.history = append(r.history, porcupine.Operation{ClientId: id, Input: in, Call: in.Call, Output: out, Return: out.Ret})
}

// finish closes the windows of the requests that died with the owner (their
// effect, if any, came before the process was reaped) and adds the drop,
// from the kill to the first answer of the new owner, as client dropClient.
func (r *linRun) finish(dropClient int) []porcupine.Operation {
	dropEnd := int64(0)
	for i, op := range r.history {
		in, out := op.Input.(leasemodel.Input), op.Output.(leasemodel.Output)
		if out.Unknown {
			out.Ret = max(r.deadAt.UnixNano(), in.Call+1)
			r.history[i].Output, r.history[i].Return = out, out.Ret
		} else if in.Epoch == 1 && (dropEnd == 0 || op.Return < dropEnd) {
			dropEnd = op.Return
		}
	}
	drop := leasemodel.Input{Kind: leasemodel.Drop, Epoch: 1, Call: r.killAt.UnixNano()}
	return append(r.history, porcupine.Operation{ClientId: dropClient, Input: drop, Call: drop.Call,
		Output: leasemodel.Output{Ret: dropEnd}, Return: max(dropEnd, drop.Call)})
}

// checkFenced is the fenced-resource oracle: on every route, a careful
// writer's token is refused only behind a token of a later placement epoch.
func (r *linRun) checkFenced(t *testing.T) {
	t.Helper()
	writes := 0
	for i := range r.resources {
		f := &r.resources[i]
		writes += len(f.writes)
		for _, w := range f.writes {
			if !w.accepted && w.token>>epochShift == w.highest>>epochShift {
				t.Fatalf("route %d: worker %d wrote token %d behind %d within one placement epoch", i, w.worker, w.token, w.highest)
			}
		}
	}
	if writes == 0 {
		t.Fatal("no fenced write: the oracle checked nothing")
	}
}

// explain narrows a failed check down for the log: which routes fail, and
// whether they fail before the kill alone, or from the drop on alone.
func (r *linRun) explain(t *testing.T, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	for route := range r.routes {
		var all, before, after []porcupine.Operation
		for _, op := range history {
			in := op.Input.(leasemodel.Input)
			if in.Kind != leasemodel.Drop && in.Route != route {
				continue
			}
			all = append(all, op)
			if in.Kind == leasemodel.Drop || in.Epoch == 1 {
				after = append(after, op)
			} else {
				before = append(before, op)
			}
		}
		t.Logf("route %d: linearizable %v; before the kill alone %v; from the drop on alone %v",
			route, porcupine.CheckOperations(model, all), porcupine.CheckOperations(model, before), porcupine.CheckOperations(model, after))
	}
}
