package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// scenarioFile is one file of clients/conformance (the README describes the
// format). Decoding is strict: an unknown field is a typo to report.
type scenarioFile struct {
	Name      string         `json:"name"`
	Proves    string         `json:"proves"`
	Placement *placementSpec `json:"placement"`
	Actors    []actorSpec    `json:"actors"`
	Steps     []step         `json:"steps"`
}

type actorSpec struct {
	Name         string `json:"name"`
	Token        string `json:"token"`
	OwnerID      string `json:"owner_id"`
	SessionTTLMs int64  `json:"session_ttl_ms"`
}

// step is one step object: the fields of every op, harness and observer
// ops alike, so that a scenario file is checked as a whole.
type step struct {
	Op string `json:"op"`

	// Harness ops.
	Actor        string `json:"actor"`
	Route        string `json:"route"`
	TTLMs        int64  `json:"ttl_ms"`
	WaitMs       int64  `json:"wait_ms"`
	Background   bool   `json:"background"`
	From         int    `json:"from"`
	Count        *int   `json:"count"`
	Holder       string `json:"holder"`
	ExpectError  string `json:"expect_error"`
	Gate         string `json:"gate"`
	On           bool   `json:"on"`
	Ms           int64  `json:"ms"`
	OpensAtLeast *int64 `json:"watch_opens_at_least"`
	OpensAtMost  *int64 `json:"watch_opens_at_most"`
	SawEvent     string `json:"saw_event"`
	Name         string `json:"name"`     // actor_watch, expect_watch_end, expect_watch_open
	Event        string `json:"event"`    // expect_watch_end
	Broker       string `json:"broker"`   // kill_broker, wait_owner, cut_store, heal_store, move, restart_broker
	Graceful     bool   `json:"graceful"` // restart_broker: SIGTERM instead of SIGKILL
	TimeoutMs    *int64 `json:"timeout_ms"`

	// Observer ops (run by the runner; listed so files decode strictly).
	Observer      string   `json:"observer"`
	Observers     []string `json:"observers"`
	Within        string   `json:"within"`
	Token         string   `json:"token"`
	Selector      string   `json:"selector"`
	PageSize      int      `json:"page_size"`
	ReconcileMs   int64    `json:"reconcile_ms"`
	Jitter        *float64 `json:"jitter"`
	ShortestTTLMs int64    `json:"shortest_ttl_ms"`
	Contains      []struct {
		Route   string `json:"route"`
		OwnerID string `json:"owner_id"`
		Holder  string `json:"holder"`
	} `json:"contains"`
	Excludes     []string `json:"excludes"`
	MatchesList  bool     `json:"matches_list"`
	EpochNotMark bool     `json:"epoch_not_mark"`
	MaxMs        int64    `json:"max_ms"`
	Worker       string   `json:"worker"`         // worker_acquire, worker_lost, worker_holds
	MinToken     int64    `json:"min_token"`      // worker_acquire
	NewSession   bool     `json:"new_session"`    // worker_acquire
	ForMs        int64    `json:"for_ms"`         // worker_holds
	SessionTTLMs int64    `json:"session_ttl_ms"` // worker_acquire
	Brokers      []string `json:"brokers"`        // observe, worker_acquire: names of GET /brokers
}

// observerOps are run by the runner, never by the harness: the observer
// ops, worker_acquire (a session and a lease of the SDK under test),
// worker_extend (that lease extended), worker_lost (its loss signal) and
// worker_holds (its absence).
var observerOps = map[string]bool{
	"observe": true, "wait_ready": true, "expect_not_ready": true, "expect_view": true,
	"mark_epoch": true, "expect_same_view": true, "expect_stopped": true, "close_observer": true,
	"worker_acquire": true, "worker_extend": true, "worker_lost": true, "worker_holds": true,
}

// harnessOps are the ops POST /step runs (README: "Steps").
var harnessOps = map[string]bool{
	"acquire": true, "acquire_many": true, "release": true, "extend": true,
	"foreign_extend": true, "foreign_release": true, "end_session": true, "abandon_session": true,
	"new_session": true, "hold": true, "unhold": true, "wait_held": true, "drop_changes": true,
	"restart_broker": true, "sleep": true, "expect_proxy": true, "wait_background": true,
	"actor_watch": true, "expect_watch_end": true, "expect_watch_open": true,
	"kill_broker": true, "wait_owner": true, "cut_store": true, "heal_store": true, "move": true,
}

// timeout is how long a waiting step waits: timeout_ms, default 5 s.
func (s step) timeout() time.Duration {
	if s.TimeoutMs == nil {
		return 5 * time.Second
	}
	return time.Duration(*s.TimeoutMs) * time.Millisecond
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// check validates what the harness relies on before anything is reset.
func (sc *scenarioFile) check() error {
	if sc.Name == "" {
		return fmt.Errorf("the scenario has no name")
	}
	if sc.Proves == "" || strings.Contains(sc.Proves, "\n") {
		return fmt.Errorf("%s: 'proves' must be one line naming the seed requirement", sc.Name)
	}
	if sc.Placement != nil {
		if err := sc.Placement.check(sc.Name); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, a := range sc.Actors {
		if a.Name == "" || seen[a.Name] {
			return fmt.Errorf("%s: actor names must be unique and not empty (%q)", sc.Name, a.Name)
		}
		seen[a.Name] = true
		if _, ok := tokens[a.Token]; !ok {
			return fmt.Errorf("%s: actor %s: no token %q", sc.Name, a.Name, a.Token)
		}
	}
	for i, st := range sc.Steps {
		if !harnessOps[st.Op] && !observerOps[st.Op] {
			return fmt.Errorf("%s: step %d: no op %q", sc.Name, i+1, st.Op)
		}
	}
	return nil
}
