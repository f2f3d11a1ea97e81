package muster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The Go runner of the language-neutral scenarios in clients/conformance
// (their README describes the format and the harness's control API). The
// shared harness runs the broker, the gating proxy and the actors; this
// runner implements only the observer ops with this package's Observer and
// forwards every other op to the harness's POST /step.

type scenarioFile struct {
	Name   string            `json:"name"`
	Proves string            `json:"proves"`
	Steps  []json.RawMessage `json:"steps"`
	raw    []byte
}

// obsStep holds the fields of the observer ops; other fields are ignored
// here (the step is forwarded verbatim).
type obsStep struct {
	Op            string   `json:"op"`
	Observer      string   `json:"observer"`
	Observers     []string `json:"observers"`
	Within        string   `json:"within"`
	Token         string   `json:"token"`
	Selector      string   `json:"selector"`
	PageSize      int      `json:"page_size"`
	ReconcileMs   int64    `json:"reconcile_ms"`
	Jitter        *float64 `json:"jitter"`
	ShortestTTLMs int64    `json:"shortest_ttl_ms"`
	Count         *int     `json:"count"`
	Contains      []struct {
		Route   string `json:"route"`
		OwnerID string `json:"owner_id"`
		Holder  string `json:"holder"`
	} `json:"contains"`
	Excludes     []string `json:"excludes"`
	MatchesList  bool     `json:"matches_list"`
	EpochNotMark bool     `json:"epoch_not_mark"`
	TimeoutMs    *int64   `json:"timeout_ms"`
	MaxMs        int64    `json:"max_ms"`
	ExpectError  string   `json:"expect_error"`
	// worker_acquire, worker_extend, worker_lost, worker_holds
	Worker     string `json:"worker"`
	Route      string `json:"route"`
	TTLMs      int64  `json:"ttl_ms"`
	WaitMs     int64  `json:"wait_ms"`
	MinToken   int64  `json:"min_token"`
	NewSession bool   `json:"new_session"`
	ForMs      int64  `json:"for_ms"`
	// SessionTTLMs is the TTL of the session worker_acquire creates
	// (default 10 s).
	SessionTTLMs int64 `json:"session_ttl_ms"`
	// Brokers (observe, worker_acquire) names the brokers of the client,
	// in order (GET /brokers gives their URLs); the proxy alone when empty.
	Brokers []string `json:"brokers"`
}

func (s obsStep) timeout() time.Duration {
	if s.TimeoutMs == nil {
		return 5 * time.Second
	}
	return time.Duration(*s.TimeoutMs) * time.Millisecond
}

// runner runs one scenario's observer ops and its workers.
type runner struct {
	h         *conformanceHarness
	broken    brokenMode // of every observer and client (broken variants)
	observers map[string]*Observer
	tokens    map[string]string // observer → token name
	marks     map[string]string // observer → epoch
	workers   map[string]*worker
	highest   map[string]int64 // route → the highest fencing token a worker got
	trs       []*http.Transport
}

// worker is a scenario's worker run by this runner: one client (built on
// first use) and its sessions.
type worker struct {
	c        *Client
	session  *Session
	sessions []*Session
	leases   map[string]*Lease // by route: the last lease worker_acquire got
}

// loadScenarios reads every scenario file, in name order.
func loadScenarios(tb testing.TB) []scenarioFile {
	tb.Helper()
	files, err := filepath.Glob("../conformance/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no scenarios: %v", err)
	}
	var out []scenarioFile
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var sc scenarioFile
		if err := json.Unmarshal(data, &sc); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		if sc.Proves == "" || strings.Contains(sc.Proves, "\n") {
			tb.Fatalf("%s: 'proves' must be one line naming the seed requirement", f)
		}
		sc.raw = data
		out = append(out, sc)
	}
	return out
}

func TestConformance(t *testing.T) {
	h := sharedHarness(t)
	for _, sc := range loadScenarios(t) {
		t.Run(sc.Name, func(t *testing.T) {
			err := runScenario(h, sc, 0)
			if why, ok := skipped(err); ok {
				t.Skip(why)
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// skipped reports whether err is the harness's refusal to run a scenario it
// cannot run here (scenario_skipped: a placed scenario with
// MUSTER_TEST_PG=off), and why.
func skipped(err error) (string, bool) {
	var e *harnessError
	if errors.As(err, &e) && e.Code == "scenario_skipped" {
		return e.Detail, true
	}
	return "", false
}

// runScenario runs sc through the harness; broken (0 for none) builds every
// observer and client deliberately broken. It returns the first failed step.
func runScenario(h *conformanceHarness, sc scenarioFile, broken brokenMode) error {
	ctx := context.Background()
	if err := h.post(ctx, "/scenario", sc.raw); err != nil {
		return fmt.Errorf("loading the scenario: %w", err)
	}
	r := &runner{h: h, broken: broken, observers: map[string]*Observer{}, tokens: map[string]string{},
		marks: map[string]string{}, workers: map[string]*worker{}, highest: map[string]int64{}}
	defer r.close()
	for i, raw := range sc.Steps {
		var st obsStep
		if err := json.Unmarshal(raw, &st); err != nil {
			return fmt.Errorf("step %d: %v", i+1, err)
		}
		if err := r.step(ctx, st, raw); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.Op, err)
		}
	}
	return nil
}

// close closes every observer and worker session of the scenario, then
// lets the harness drop whatever is still held at its gates.
func (r *runner) close() {
	done := make(chan struct{})
	go func() {
		for _, o := range r.observers {
			o.Close()
		}
		for _, w := range r.workers {
			for _, s := range w.sessions {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = s.Close(ctx)
				cancel()
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second): // a broken Close: the reset frees it
		_ = r.h.post(context.Background(), "/reset", nil)
		<-done
	}
	for _, tr := range r.trs {
		tr.CloseIdleConnections()
	}
}

func (r *runner) observer(name string) (*Observer, error) {
	if o := r.observers[name]; o != nil {
		return o, nil
	}
	return nil, fmt.Errorf("no observer %q", name)
}

func (r *runner) step(ctx context.Context, st obsStep, raw json.RawMessage) error {
	switch st.Op {
	case "observe":
		return r.observe(st)
	case "wait_ready":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, st.timeout())
		defer cancel()
		return o.WaitReady(wctx)
	case "expect_not_ready":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		if o.Ready() {
			return errors.New("the observer is ready")
		}
		return nil
	case "expect_view":
		return r.expectView(ctx, st)
	case "mark_epoch":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		r.marks[st.Observer] = o.View().Epoch
		return nil
	case "expect_same_view":
		return r.expectSameView(st)
	case "expect_stopped":
		o, err := r.observer(st.Observer)
		if err != nil {
			return err
		}
		select {
		case <-o.Done():
		case <-time.After(st.timeout()):
			return fmt.Errorf("the observer did not stop within %v (err %v)", st.timeout(), o.Err())
		}
		var e *Error
		if !errors.As(o.Err(), &e) || string(e.Code) != st.ExpectError {
			return fmt.Errorf("stopped with %v, want error %s", o.Err(), st.ExpectError)
		}
		return nil
	case "close_observer":
		return r.closeObserver(st)
	case "worker_acquire":
		return r.workerAcquire(ctx, st)
	case "worker_extend":
		return r.workerExtend(ctx, st)
	case "worker_lost":
		return r.workerLost(st)
	case "worker_holds":
		return r.workerHolds(st)
	}
	return r.h.post(ctx, "/step", raw)
}

// client is a client of the proxy (or of the named brokers, in order)
// with token's secret, broken as the scenario's variant asks.
func (r *runner) client(ctx context.Context, token string, brokers []string) (*Client, error) {
	secret, ok := r.h.tokens[token]
	if !ok {
		return nil, fmt.Errorf("no token %q", token)
	}
	base := r.h.Proxy
	if len(brokers) > 0 {
		var urls map[string]string
		if err := r.h.get(ctx, "/brokers", &urls); err != nil {
			return nil, err
		}
		var list []string
		for _, b := range brokers {
			if urls[b] == "" {
				return nil, fmt.Errorf("no broker %q in GET /brokers", b)
			}
			list = append(list, urls[b])
		}
		base = strings.Join(list, ",")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	r.trs = append(r.trs, tr)
	opts := []Option{WithToken(secret), WithHTTPClient(&http.Client{Transport: tr})}
	if r.broken&brokenNoFollow != 0 {
		opts = append(opts, WithoutFollow())
	}
	if r.broken&brokenSingleBroker != 0 {
		opts = append(opts, func(c *Client) { c.single = true })
	}
	c, err := New(base, opts...)
	if err != nil {
		return nil, err
	}
	if r.broken&brokenStickyOwner != 0 {
		c.follow.sticky = true
	}
	c.follow.stay = r.broken&brokenStayOnUnavailable != 0
	c.neverLost = r.broken&brokenNeverLost != 0
	c.sendPlusTTL = r.broken&brokenSendPlusTTL != 0
	c.lateLoss = r.broken&brokenLateLoss != 0
	c.creatorLoss = r.broken&brokenCreatorLoss != 0
	return c, nil
}

// brokenVariants names, per scenario, the deliberately broken observer it
// must catch. Every scenario needs one: a scenario that passes with a
// broken observer proves nothing.
var brokenVariants = map[string]brokenMode{
	"bootstrap-changes-before-stream":       brokenIgnoreSnapshot,
	"bootstrap-changes-during-paging":       brokenDropBuffered,
	"bootstrap-changes-right-after-ready":   brokenIgnoreLive,
	"steady-state-updates":                  brokenIgnoreExpired,
	"overflow-recovery":                     brokenStayReady,
	"broker-restart-fresh-bootstrap":        brokenMergeViews,
	"holder-session-ends":                   brokenIgnoreSessionClosed,
	"periodic-reconciliation":               brokenNoReconcile,
	"close-while-page-hangs":                brokenUncancellablePages,
	"overlapping-observers-converge":        brokenDropBuffered | brokenIgnoreLive,
	"family-isolation":                      brokenRetryFatal,
	"observation-grants-nothing":            brokenIgnoreSnapshot,
	"waiter-granted-after-release":          brokenIgnoreLive,
	"expired-lease-leaves-view":             brokenIgnoreExpired,
	"superseded-same-session-same-selector": brokenIgnoreLive,
	"wildcard-registration-limit":           brokenIgnoreLive,
	"forbidden-selector-stops-observer":     brokenRetryFatal,
	"follow-owner":                          brokenNoFollow,
	"failover-follow-owner":                 brokenStickyOwner,
	"grant-after-wait-keeps-lease":          brokenSendPlusTTL,
	"restart-loses-lease-promptly":          brokenLateLoss,
	"dead-broker-first":                     brokenSingleBroker,
	"unavailable-broker-moves-on":           brokenStayOnUnavailable,
	"planned-move-keeps-session":            brokenCreatorLoss,
}

// moreBrokenVariants are further broken clients a scenario must catch, each
// at the named step.
var moreBrokenVariants = []struct {
	scenario, name string
	mode           brokenMode
	step           string
}{
	{"failover-follow-owner", "never-lost", brokenNeverLost, "worker_lost"},
	{"unavailable-broker-moves-on", "single-broker", brokenSingleBroker, "worker_acquire"},
}

// TestConformanceCatchesBrokenObservers runs each scenario with its broken
// observer and wants it to FAIL. Every broken variant also skips the
// periodic reconciliation (brokenNoReconcile), which would otherwise repair
// most faults within its interval and let a slow scenario pass by luck; the
// control subtest shows that skipping it alone fails only the scenario about
// reconciliation. The failures are mostly waits running out, so the
// broken subtests run in parallel on a few harnesses.
func TestConformanceCatchesBrokenObservers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario to its failure")
	}
	scenarios := loadScenarios(t)
	pool := harnessPool(t, 4)
	// The control runs first and alone (not parallel): it needs the
	// scenarios' timing to hold.
	t.Run("control", func(t *testing.T) {
		h := <-pool
		defer func() { pool <- h }()
		for _, sc := range scenarios {
			err := runScenario(h, sc, brokenNoReconcile)
			if why, ok := skipped(err); ok {
				t.Logf("%s skipped: %s", sc.Name, why)
				continue
			}
			if want := sc.Name == "periodic-reconciliation"; (err != nil) != want {
				t.Errorf("%s without reconciliation: err %v, want a failure: %v", sc.Name, err, want)
			}
		}
	})
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			mode, ok := brokenVariants[sc.Name]
			if !ok {
				t.Fatalf("no broken observer variant for scenario %s: add one to brokenVariants", sc.Name)
			}
			h := <-pool
			defer func() { pool <- h }()
			err := runScenario(h, sc, mode|brokenNoReconcile)
			if why, ok := skipped(err); ok {
				t.Skip(why)
			}
			if err == nil {
				t.Fatalf("the scenario passed with a broken observer (%#x)", mode)
			}
			t.Logf("caught: %v", err)
		})
	}
	for _, v := range moreBrokenVariants {
		i := slices.IndexFunc(scenarios, func(sc scenarioFile) bool { return sc.Name == v.scenario })
		if i < 0 {
			t.Fatalf("no scenario %s", v.scenario)
		}
		t.Run(v.scenario+"+"+v.name, func(t *testing.T) {
			t.Parallel()
			h := <-pool
			defer func() { pool <- h }()
			err := runScenario(h, scenarios[i], v.mode|brokenNoReconcile)
			if why, ok := skipped(err); ok {
				t.Skip(why)
			}
			if err == nil || !strings.Contains(err.Error(), "("+v.step+")") {
				t.Fatalf("with a broken client (%#x): %v, want a failure at %s", v.mode, err, v.step)
			}
			t.Logf("caught: %v", err)
		})
	}
}
