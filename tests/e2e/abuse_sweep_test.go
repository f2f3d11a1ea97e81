package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/tests/hostile"
)

// The sweep of the abuse report: a 1.4 KB schema of nested anyOf over $ref
// asked for 2^21 evaluations per spec. It is refused before a spec is read,
// fast and typed, naming the limit; the runtime budget stops what the static
// checks cannot see; and a legitimate schema of 256 KiB still sweeps.
func TestSweepHostileSchemas(t *testing.T) {
	b := MustStartBrokerOn(t, "")
	const root = "hostile"
	b.mustRegister(t, "", root, "n", `1`)
	b.mustRegister(t, "", root, "s", `"text"`)
	b.mustRegister(t, "", root, "d", hostile.DeepSpec(40))
	sweep := func(schema string) (*Response, time.Duration) {
		start := time.Now()
		resp := b.Do(t, Request{Method: "POST", Path: fleetPath(root, "/sweep"), Body: `{"schema":` + schema + `}`})
		return resp, time.Since(start)
	}
	for _, levels := range []int{21, 25} {
		resp, took := sweep(hostile.Schema(levels))
		wantProblem(t, resp, 400, "invalid_request")
		if _, detail := resp.Problem(t); !strings.Contains(detail, "(limit: $ref expansion)") {
			t.Errorf("%d levels: the refusal does not name the limit: %s", levels, detail)
		}
		if took > time.Second {
			t.Errorf("%d levels: refused after %v", levels, took)
		}
		t.Logf("%d-level schema (%d bytes): 400 after %v", levels, len(hostile.Schema(levels)), took)
	}
	// Exponential in the instance, invisible to the static checks: the
	// per-spec budget stops it, and nothing is deleted.
	resp, took := sweep(hostile.DoublingSchema)
	wantProblem(t, resp, 400, "invalid_request")
	if _, detail := resp.Problem(t); !strings.Contains(detail, "per spec") {
		t.Errorf("doubling schema: %s", detail)
	}
	t.Logf("doubling schema over a 40-deep spec: 400 after %v", took)
	if n := len(b.specs(t, "", root, 0)); n != 3 {
		t.Fatalf("refused sweeps left %d of 3 specs", n)
	}
	if got := b.metric(t, "muster_fleet_sweeps_total", `outcome="refused"`); got != 3 {
		t.Errorf("muster_fleet_sweeps_total{outcome=refused} = %v, want 3", got)
	}

	// A legitimate schema as large as the contract allows.
	legit := hostile.LegitSchema(fleetstore.MaxSchemaBytes)
	resp, took = sweep(legit)
	if resp.Status != 200 {
		t.Fatalf("256 KiB schema: %d %.300s", resp.Status, resp.Body)
	}
	var res struct {
		Kept    []specRow `json:"kept"`
		Dropped []string  `json:"dropped"`
	}
	resp.JSON(t, &res)
	if len(res.Kept) != 0 || len(res.Dropped) != 3 {
		t.Errorf("256 KiB schema kept %v dropped %v, want every spec dropped (none is an object with a topic)", namesOf(res.Kept), res.Dropped)
	}
	t.Logf("%d-byte schema: 200 after %v", len(legit), took)
}

// A sweep whose client leaves stops validating: the work is checked against
// the request's context between specs and every 1,024 evaluations.
func TestSweepStopsWhenClientLeaves(t *testing.T) {
	b := MustStartBrokerOn(t, "")
	const root = "slow"
	// Each spec takes tens of thousands of evaluations under DoublingSchema
	// (inside the per-spec budget): 60 of them are seconds of work.
	for range 60 {
		b.mustRegister(t, "", root, "d", hostile.DeepSpec(14))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", b.URL()+fleetPath(root, "/sweep"), strings.NewReader(`{"schema":`+hostile.DoublingSchema+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the sweep answered %d within 300 ms; the test needs a slower one", resp.StatusCode)
	}
	left := time.Now()
	for b.metric(t, "muster_fleet_sweeps_running") != 0 {
		if time.Since(left) > 2*time.Second {
			t.Fatal("the sweep still runs 2 s after its client left")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the sweep stopped %v after its client left", time.Since(left))
	if got := b.metric(t, "muster_fleet_sweeps_total", `outcome="abandoned"`); got != 1 {
		t.Errorf("muster_fleet_sweeps_total{outcome=abandoned} = %v, want 1", got)
	}
	if n := len(b.specs(t, "", root, 0)); n != 60 {
		t.Errorf("%d of 60 specs left", n)
	}
}

// One sweep per family validates at a time: a family's second sweep waits
// for its first, while another family's sweep runs at once. A hostile
// schema is refused before it waits.
func TestSweepGate(t *testing.T) {
	a := TokenSpec{Secret: "a-secret", Family: "fa", Grants: []string{"fleet://**#*"}}
	other := TokenSpec{Secret: "b-secret", Family: "fb", Grants: []string{"fleet://**#*"}}
	b := MustStartConfiguredBroker(t, "limits:\n  broker: {sweeps: 2}\n", a, other)
	for range 60 {
		b.mustRegister(t, a.Secret, "slow", "d", hostile.DeepSpec(14))
	}
	b.mustRegister(t, other.Secret, "quick", "d", `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", b.URL()+fleetPath("slow", "/sweep"), strings.NewReader(`{"schema":`+hostile.DoublingSchema+`}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+a.Secret)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	go slow()
	go slow()
	deadline := time.Now().Add(5 * time.Second)
	for b.metric(t, "muster_fleet_sweeps_running") != 1 || b.metric(t, "muster_fleet_sweeps_waiting") != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("running %v waiting %v, want 1 and 1", b.metric(t, "muster_fleet_sweeps_running"), b.metric(t, "muster_fleet_sweeps_waiting"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	resp := b.Do(t, Request{Method: "POST", Path: fleetPath("quick", "/sweep"), Token: other.Secret, Body: `{"schema":{"type":"object"}}`})
	if resp.Status != 200 {
		t.Fatalf("the other family's sweep: %d %s", resp.Status, resp.Body)
	}
	t.Logf("another family swept in %v while family fa had one sweep running and one waiting", time.Since(start))
	start = time.Now()
	wantProblem(t, b.Do(t, Request{Method: "POST", Path: fleetPath("slow", "/sweep"), Token: a.Secret, Body: `{"schema":` + hostile.Schema(25) + `}`}), 400, "invalid_request")
	if took := time.Since(start); took > time.Second {
		t.Errorf("a hostile schema waited %v behind the family's sweeps", took)
	}
	cancel()
	for b.metric(t, "muster_fleet_sweeps_running")+b.metric(t, "muster_fleet_sweeps_waiting") != 0 {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("the sweeps did not end after their clients left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
