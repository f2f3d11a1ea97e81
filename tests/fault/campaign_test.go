package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// The fault campaign (issue 16). A mixed workload runs against the real
// broker binary on PostgreSQL — workers acquiring, extending and releasing
// with waiters, LIST paging, observers from the Go SDK, fleet register,
// forget and sweep, stalled watch readers, clients vanishing mid-request —
// while faults are injected: SIGKILL and restart of the broker, PostgreSQL
// stopped and started, its connections cut; and the hostile requests of
// the report are sent at the same time. After every round:
//
//   - no acknowledged (201) spec is lost and no name is ever minted twice;
//   - within an epoch, fencing tokens never go backwards on a route;
//   - every observer converges to the broker's LIST;
//   - goroutines, fds and memory stay within a bound of the first round;
//   - the hostile requests are refused quickly, the hostile family stops at
//     its own quota (scope family), and the prober's latency with the
//     hostile requests on stays within 2× of its latency with them off (they
//     alternate every 250 ms in the hostile-only round, so both halves see
//     the same background load), or a few ms above it: the median always,
//     the p99 in a long campaign (on a loaded CI machine the top 1 % of a
//     few hundred samples is noise).
//
// `go test ./tests/fault` runs the short campaign (5 rounds of 3 s);
// MUSTER_FAULT_ROUNDS=N and MUSTER_FAULT_ROUND_SECONDS=S run a long one.

type fault string

const (
	quiet       fault = "quiet"
	hostileOnly fault = "hostile"
	kill9       fault = "kill9"
	pgStop      fault = "pg-stop"
	pgCut       fault = "pg-cut"
)

type roundFigures struct {
	fault           fault
	ops             map[string]int
	probeP99        time.Duration
	probeOff        time.Duration // hostile-only round: p99 with the hostile requests off
	probeOn         time.Duration // and on
	medianOff       time.Duration // the same, p50
	medianOn        time.Duration
	goroutines, fds float64
	rssMiB          float64
	converge        time.Duration
	hostile         hostileLog
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestFaultCampaign(t *testing.T) {
	rounds := envInt("MUSTER_FAULT_ROUNDS", 5)
	roundLen := time.Duration(envInt("MUSTER_FAULT_ROUND_SECONDS", 3)) * time.Second
	pg := startPrivatePG(t)
	store := ""
	if pg != nil {
		store = pg.URL
	}
	b := startBroker(t, store)
	l := newLedger()

	// Observers live through every round and every fault.
	obsCtx, stopObs := context.WithCancel(context.Background())
	defer stopObs()
	var observers []*muster.Observer
	for range 2 {
		c, err := muster.New(b.url(), muster.WithToken(obsTok.Secret))
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.Observe(obsCtx, "lease://work/**", muster.WithReconcileInterval(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		observers = append(observers, o)
	}

	plan := []fault{quiet, hostileOnly, kill9, pgStop, pgCut}
	resident := ""
	var figures []roundFigures
	for r := range rounds {
		f := plan[min(r, len(plan)-1)]
		if r >= len(plan) {
			f = plan[2+(r-len(plan))%3]
		}
		if pg == nil && (f == pgStop || f == pgCut) {
			f = kill9
		}
		l.mu.Lock()
		l.probes, l.ops, l.hostile = [2][]time.Duration{}, map[string]int{}, hostileLog{}
		l.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), roundLen)
		done := make(chan struct{})
		go func() {
			w := &workload{b: b, l: l, hostile: f != quiet, start: time.Now()}
			if f == hostileOnly {
				w.window = 250 * time.Millisecond
			}
			w.run(ctx)
			close(done)
		}()
		sleep(context.Background(), roundLen/2)
		switch f {
		case kill9:
			b.kill9()
		case pgStop:
			pg.Stop()
			time.Sleep(time.Second)
			pg.Start()
		case pgCut:
			// The pool may hold no connection at this instant: try for 2 s.
			cut := 0
			for deadline := time.Now().Add(2 * time.Second); cut == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				cut = cutBroker(t, pg.URL)
			}
			if cut == 0 {
				t.Errorf("round %d: no broker connection to cut within 2 s", r)
			}
		}
		<-done
		cancel()

		fig := roundFigures{fault: f}
		if err := b.waitReady(30 * time.Second); err != nil {
			t.Fatalf("round %d (%s): the broker did not recover: %v\n%s", r, f, err, b.logs.String())
		}
		checkSpecs(t, r, b, l)
		checkFencing(t, r, l)
		resident = hold(t, r, b, resident)
		fig.converge = checkObservers(t, r, b, observers)
		l.mu.Lock()
		fig.ops, fig.probeP99, fig.hostile = l.ops, p99(append(slices.Clone(l.probes[0]), l.probes[1]...)), l.hostile
		fig.probeOff, fig.probeOn = p99(l.probes[0]), p99(l.probes[1])
		fig.medianOff, fig.medianOn = p50(l.probes[0]), p50(l.probes[1])
		violations := slices.Clone(l.violations)
		l.violations = nil
		l.mu.Unlock()
		for _, v := range violations {
			t.Errorf("round %d (%s): %s", r, f, v)
		}
		fig.goroutines, fig.fds, fig.rssMiB = b.metric("go_goroutines"), float64(b.fds()), b.metric("process_resident_memory_bytes")/(1<<20)
		figures = append(figures, fig)
		checkRound(t, r, figures, os.Getenv("MUSTER_FAULT_ROUNDS") != "")
		if f == hostileOnly {
			t.Logf("round %d: probe p50 %v / p99 %v with the hostile requests off, p50 %v / p99 %v with them on (alternating every 250 ms)", r, fig.medianOff, fig.probeOff, fig.medianOn, fig.probeOn)
		}
		t.Logf("round %d %-8s ops %v | probe p99 %v | goroutines %.0f fds %.0f rss %.0f MiB | observers converged in %v | hostile: %d sweeps (max %v), %d slow bodies (max %v), %d sessions (then %q), %d streams (then %q)",
			r, f, fig.ops, fig.probeP99, fig.goroutines, fig.fds, fig.rssMiB, fig.converge,
			fig.hostile.sweeps, fig.hostile.sweepMax, fig.hostile.slow, fig.hostile.slowMax,
			fig.hostile.sessions, fig.hostile.sessionScope, fig.hostile.streams, fig.hostile.streamScope)
	}
	t.Logf("campaign: %d rounds of %v, %d broker starts, %d acknowledged specs (%d forgotten), %d grants checked",
		rounds, roundLen, b.starts, len(l.acked), len(l.forgotten), len(l.grants))
}

// checkRound compares a round with the first: resources within bounds, and
// the hostile family contained.
func checkRound(t *testing.T, r int, figs []roundFigures, long bool) {
	t.Helper()
	base, f := figs[0], figs[r]
	if f.goroutines > base.goroutines*1.5+50 {
		t.Errorf("round %d: %.0f goroutines (first round %.0f)", r, f.goroutines, base.goroutines)
	}
	if f.fds > base.fds+50 {
		t.Errorf("round %d: %.0f fds (first round %.0f)", r, f.fds, base.fds)
	}
	if f.rssMiB > base.rssMiB*2+64 {
		t.Errorf("round %d: %.0f MiB resident (first round %.0f)", r, f.rssMiB, base.rssMiB)
	}
	if f.fault == quiet {
		return
	}
	h := f.hostile
	if h.sweeps == 0 || h.sweepMax > time.Second {
		t.Errorf("round %d: %d hostile sweeps, slowest refused after %v", r, h.sweeps, h.sweepMax)
	}
	if h.slow == 0 || h.slowMax > 2500*time.Millisecond {
		t.Errorf("round %d: %d slow bodies, the longest lived %v (deadline 1 s)", r, h.slow, h.slowMax)
	}
	if h.sessionScope != "family" || h.streamScope != "family" {
		t.Errorf("round %d: the hostile floods ended with scope %q (sessions) and %q (streams), want family", r, h.sessionScope, h.streamScope)
	}
	if f.fault == hostileOnly {
		// The median is asserted always; the p99, whose top 1 % a loaded
		// CI machine moves at will, in a long campaign (MUSTER_FAULT_ROUNDS).
		if limit := max(2*f.medianOff, f.medianOff+5*time.Millisecond); f.medianOn > limit {
			t.Errorf("round %d: probe p50 %v with the hostile requests on, %v with them off (limit %v)", r, f.medianOn, f.medianOff, limit)
		}
		if long { // the target exactly: p99 within 2x of the quiet half
			if limit := 2 * f.probeOff; f.probeOn > limit {
				t.Errorf("round %d: probe p99 %v with the hostile requests on, %v with them off (limit %v)", r, f.probeOn, f.probeOff, limit)
			}
		}
	}
}

// hold ends the previous resident session (if the broker still knows it)
// and holds five routes with a new one, so that the observers have changes
// to catch up with after every round: releases, and grants to a new holder.
func hold(t *testing.T, r int, b *broker, prev string) string {
	t.Helper()
	if prev != "" {
		do(context.Background(), client, "DELETE", b.url()+"/v1/sessions/"+prev, workTok.Secret, "")
	}
	st, body, _ := do(context.Background(), client, "POST", b.url()+"/v1/sessions", workTok.Secret, `{"owner_id":"resident","ttl_ms":60000}`)
	var s struct {
		ID string `json:"session_id"`
	}
	if st != 201 || json.Unmarshal(body, &s) != nil {
		t.Fatalf("round %d: resident session: %d %s", r, st, body)
	}
	for i := range 5 {
		st, body, _ := do(context.Background(), client, "POST", fmt.Sprintf("%s/v1/leases/work/resident/u%d/acquire", b.url(), i), workTok.Secret,
			fmt.Sprintf(`{"session_id":%q,"ttl_ms":60000,"wait_ms":0}`, s.ID))
		if st != 200 {
			t.Fatalf("round %d: resident acquire: %d %s", r, st, body)
		}
	}
	return s.ID
}

// checkSpecs: every acknowledged spec not forgotten is still there.
func checkSpecs(t *testing.T, r int, b *broker, l *ledger) {
	t.Helper()
	have := map[string]bool{}
	cursor := ""
	for {
		q := url.Values{"limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		st, body, _ := do(context.Background(), client, "GET", b.url()+"/v1/fleets/camp/specs?"+q.Encode(), workTok.Secret, "")
		if st != 200 {
			t.Fatalf("round %d: list specs: %d %s", r, st, body)
		}
		var p struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			Next *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			if have[it.Name] {
				t.Errorf("round %d: %s listed twice", r, it.Name)
			}
			have[it.Name] = true
		}
		if p.Next == nil {
			break
		}
		cursor = *p.Next
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := 0
	for n := range l.acked {
		if !l.forgotten[n] && !l.unsure[n] && !have[n] {
			lost++
			if lost <= 5 {
				t.Errorf("round %d: acknowledged spec %s is lost", r, n)
			}
		}
		if l.forgotten[n] && have[n] {
			t.Errorf("round %d: forgotten spec %s is back", r, n)
		}
	}
}

// checkFencing: within an epoch, a grant acknowledged before another was
// requested has the smaller token, route by route.
func checkFencing(t *testing.T, r int, l *ledger) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[string][]grant{}
	for _, g := range l.grants {
		by[g.epoch+" "+g.route] = append(by[g.epoch+" "+g.route], g)
	}
	for k, gs := range by {
		slices.SortFunc(gs, func(a, b grant) int { return a.recv.Compare(b.recv) })
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				if gs[i].recv.Before(gs[j].sent) && gs[i].token >= gs[j].token {
					t.Errorf("round %d: %s: token %d granted after token %d", r, k, gs[j].token, gs[i].token)
					return
				}
			}
		}
	}
}

// checkObservers waits until every observer's view equals the broker's LIST.
func checkObservers(t *testing.T, r int, b *broker, obs []*muster.Observer) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < 20*time.Second {
		want, ok := listRoutes(b)
		if ok {
			converged := true
			for _, o := range obs {
				v := o.View()
				var got []string
				for _, it := range v.Items {
					got = append(got, it.Route+"@"+it.HolderIncarnation)
				}
				if !v.Ready || len(want) < 5 || !slices.Equal(got, want) {
					converged = false
					last = fmt.Sprintf("observer (ready %v, epoch %s) %v, LIST %v", v.Ready, v.Epoch, got, want)
				}
			}
			if converged {
				return time.Since(start)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("round %d: observers did not converge within 20 s: %s", r, last)
	return time.Since(start)
}

func listRoutes(b *broker) ([]string, bool) {
	var out []string
	cursor := ""
	for {
		q := url.Values{"selector": {"lease://work/**"}, "limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		st, body, _ := do(context.Background(), client, "GET", b.url()+"/v1/leases?"+q.Encode(), obsTok.Secret, "")
		if st != 200 {
			return nil, false
		}
		var p struct {
			Items []struct {
				Route       string `json:"route"`
				Incarnation string `json:"holder_incarnation"`
			} `json:"items"`
			Next *string `json:"next_cursor"`
		}
		if json.Unmarshal(body, &p) != nil {
			return nil, false
		}
		for _, it := range p.Items {
			out = append(out, it.Route+"@"+it.Incarnation)
		}
		if p.Next == nil {
			slices.Sort(out)
			return out, true
		}
		cursor = *p.Next
	}
}
