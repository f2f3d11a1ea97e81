package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type batchOp struct {
	Op           string `json:"op"`
	Route        string `json:"route"`
	TTLMs        int    `json:"ttl_ms,omitempty"`
	FencingToken int64  `json:"fencing_token,omitempty"`
}

type batchResult struct {
	Op     string     `json:"op"`
	Route  string     `json:"route"`
	OK     bool       `json:"ok"`
	Lease  *leaseBody `json:"lease"`
	Code   string     `json:"code"`
	Status int        `json:"status"`
	Detail string     `json:"detail"`
}

type batchBody struct {
	Results  []batchResult `json:"results"`
	Revision int64         `json:"revision"`
}

func (b *Broker) batch(tb testing.TB, token, sess string, ops []batchOp) *Response {
	tb.Helper()
	return b.Do(tb, Request{Method: "POST", Path: "/v1/leases/batch", Token: token, Body: map[string]any{"session_id": sess, "ops": ops}})
}

func (b *Broker) mustBatch(tb testing.TB, token, sess string, ops []batchOp) batchBody {
	tb.Helper()
	resp := b.batch(tb, token, sess, ops)
	if resp.Status != 200 {
		tb.Fatalf("batch: %d %s", resp.Status, resp.Body)
	}
	var out batchBody
	resp.JSON(tb, &out)
	if len(out.Results) != len(ops) {
		tb.Fatalf("batch: %d results for %d ops", len(out.Results), len(ops))
	}
	return out
}

// One request takes, renews and returns many leases; each operation has
// the outcome and the code its own endpoint would answer.
func TestBatchPartialSuccess(t *testing.T) {
	b := MustStartBroker(t)
	a := createSession(t, b, "", "worker-a", 600000)
	c := createSession(t, b, "", "worker-c", 600000)
	theirs := b.mustAcquire(t, c, "lease://acme/r/taken")
	mine := b.mustAcquire(t, a, "lease://acme/r/mine")
	b.Clock.Advance(time.Second)

	out := b.mustBatch(t, "", a, []batchOp{
		{Op: "acquire", Route: "lease://acme/r/d1", TTLMs: 5000},
		{Op: "acquire", Route: "lease://acme/r/taken", TTLMs: 5000},
		{Op: "extend", Route: "lease://acme/r/mine", FencingToken: mine.FencingToken, TTLMs: 30000},
		{Op: "extend", Route: "lease://acme/r/mine", FencingToken: mine.FencingToken + 100, TTLMs: 30000},
		{Op: "release", Route: "lease://acme/r/taken", FencingToken: theirs.FencingToken},
		{Op: "acquire", Route: "lease://acme/r/mine", TTLMs: 5000},
		{Op: "extend", Route: "lease://acme/r/free", FencingToken: 3, TTLMs: 5000},
		{Op: "release", Route: "lease://acme/r/free", FencingToken: 3},
	})
	want := []struct {
		ok      bool
		code    string
		status  int
		outcome string
	}{
		{true, "", 0, "acquired"},
		{false, "lease_held", 409, ""},
		{true, "", 0, ""},
		{false, "fenced", 409, ""},
		{false, "not_owner", 409, ""},
		{true, "", 0, "already_held"},
		{false, "lease_expired", 409, ""},
		{true, "", 0, ""},
	}
	for i, w := range want {
		r := out.Results[i]
		if r.OK != w.ok || r.Code != w.code || r.Status != w.status || r.Op == "" || r.Route == "" {
			t.Errorf("result %d = %+v, want %+v", i, r, w)
		}
		if r.OK && r.Op != "release" && (r.Lease == nil || r.Lease.Outcome != w.outcome) {
			t.Errorf("result %d lease = %+v, want outcome %q", i, r.Lease, w.outcome)
		}
		if !r.OK && (r.Lease != nil || r.Detail == "") {
			t.Errorf("failed result %d = %+v: a lease or no detail", i, r)
		}
	}
	if l := out.Results[2].Lease; l.FencingToken != mine.FencingToken || l.Renewals != 1 || !l.ExpiresAt.Equal(b.Clock.Now().Add(30*time.Second)) {
		t.Errorf("extended lease = %+v", l)
	}
	if st := b.query(t, "lease://acme/r/d1"); !st.Held || st.OwnerID != "worker-a" {
		t.Errorf("d1 after the batch: %+v", st)
	}
	if st := b.query(t, "lease://acme/r/taken"); st.OwnerID != "worker-c" {
		t.Errorf("taken after the batch: %+v", st)
	}
	// The revision after the batch: the grant, then the extend.
	if got := out.Revision; got != out.Results[0].Lease.FencingToken+1 {
		t.Errorf("revision %d, want %d", got, out.Results[0].Lease.FencingToken+1)
	}
}

// Watchers see a batch as the same operations done one by one: one change
// per held-set change, in order, and nothing for renewals or failures.
func TestBatchEventsAsOneByOne(t *testing.T) {
	b := MustStartBroker(t)
	a := createSession(t, b, "", "worker-a", 600000)
	ws := b.openWatch(t, watchOpts{}, "lease://acme/**")
	m := ws.marker(t)
	var ops []batchOp
	for i := 0; i < 5; i++ {
		ops = append(ops, batchOp{Op: "acquire", Route: fmt.Sprintf("lease://acme/r/d%d", i), TTLMs: 5000})
	}
	ops = append(ops, batchOp{Op: "release", Route: "lease://acme/r/d2", FencingToken: m.Revision + 3})
	out := b.mustBatch(t, "", a, ops)
	for i := 0; i < 5; i++ {
		ch := ws.change(t)
		if ch.Kind != "acquired" || ch.Route != ops[i].Route || ch.Revision != out.Results[i].Lease.FencingToken || ch.Item == nil || ch.Item.OwnerID != "worker-a" {
			t.Fatalf("change %d = %+v", i, ch)
		}
	}
	if ch := ws.change(t); ch.Kind != "released" || ch.Route != "lease://acme/r/d2" || ch.Revision != out.Revision {
		t.Fatalf("release change = %+v", ch)
	}
	// Renewals and failures emit nothing.
	b.mustBatch(t, "", a, []batchOp{
		{Op: "extend", Route: "lease://acme/r/d0", FencingToken: out.Results[0].Lease.FencingToken, TTLMs: 9000},
		{Op: "acquire", Route: "lease://acme/r/d1", TTLMs: 5000},
		{Op: "release", Route: "lease://acme/r/d3", FencingToken: 1},
	})
	ws.quiet(t, 100*time.Millisecond)
	// The core's own log agrees: one event per change, in revision order.
	ev := b.Events()
	if len(ev) != 6 {
		t.Fatalf("%d events recorded, want 6", len(ev))
	}
}

// Authorization is per operation: an operation outside the caller's
// grants fails alone with forbidden and the others apply.
func TestBatchAuthorizedPerOperation(t *testing.T) {
	narrow := TokenSpec{Secret: "narrow-secret", Family: "acme", Grants: []string{"lease://acme/mine/*#write", "lease://acme/**#read"}}
	b := MustStartBroker(t, narrow, readerTok, otherTok)
	sess := createSession(t, b, narrow.Secret, "w", 600000)
	out := b.mustBatch(t, narrow.Secret, sess, []batchOp{
		{Op: "acquire", Route: "lease://acme/mine/a", TTLMs: 5000},
		{Op: "acquire", Route: "lease://acme/theirs/a", TTLMs: 5000},
		{Op: "release", Route: "lease://acme/theirs/a", FencingToken: 1},
	})
	if !out.Results[0].OK || out.Results[1].Code != "forbidden" || out.Results[1].Status != 403 || out.Results[2].Code != "forbidden" {
		t.Fatalf("results = %+v", out.Results)
	}
	var st statusBody
	b.Do(t, Request{Method: "GET", Path: leasePath("lease://acme/theirs/a"), Token: narrow.Secret}).JSON(t, &st)
	if st.Route == "" || st.Held {
		t.Fatalf("a forbidden acquire was applied: %+v", st)
	}
	// A read-only caller is refused per operation; another family's token
	// does not see the session at all.
	rsess := createSession(t, b, readerTok.Secret, "r", 600000)
	out = b.mustBatch(t, readerTok.Secret, rsess, []batchOp{{Op: "acquire", Route: "lease://acme/mine/b", TTLMs: 5000}})
	if out.Results[0].Code != "forbidden" {
		t.Fatalf("reader: %+v", out.Results)
	}
	resp := b.batch(t, otherTok.Secret, sess, []batchOp{{Op: "acquire", Route: "lease://acme/mine/c", TTLMs: 5000}})
	if code, _ := resp.Problem(t); resp.Status != 404 || code != "session_not_found" {
		t.Fatalf("other family: %d %s", resp.Status, resp.Body)
	}
	if resp := b.batch(t, "", sess, []batchOp{{Op: "acquire", Route: "lease://acme/mine/c", TTLMs: 5000}}); resp.Status != 401 {
		t.Fatalf("no token: %d", resp.Status)
	}
}

// A malformed batch is refused whole, with a typed error naming the
// operation, and leaves no state behind.
func TestBatchRefusedWhole(t *testing.T) {
	b := MustStartBroker(t)
	a := createSession(t, b, "", "worker-a", 600000)
	good := batchOp{Op: "acquire", Route: "lease://acme/r/good", TTLMs: 5000}
	many := make([]map[string]any, 257)
	for i := range many {
		many[i] = map[string]any{"op": "acquire", "route": fmt.Sprintf("lease://acme/r/m%d", i), "ttl_ms": 5000}
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
		detail string // a fragment of the problem's detail
	}{
		{"NoOps", map[string]any{"session_id": a, "ops": []any{}}, 400, "invalid_request", ""},
		{"TooMany", map[string]any{"session_id": a, "ops": many}, 400, "invalid_request", ""},
		{"Wildcard", map[string]any{"session_id": a, "ops": []any{good, batchOp{Op: "acquire", Route: "lease://acme/r/*", TTLMs: 5000}}}, 400, "invalid_route", "ops/1"},
		{"NotARoute", map[string]any{"session_id": a, "ops": []any{good, batchOp{Op: "acquire", Route: "http://acme/r/x", TTLMs: 5000}}}, 400, "invalid_request", "/ops/1/route"},
		{"TwoSegments", map[string]any{"session_id": a, "ops": []any{good, batchOp{Op: "acquire", Route: "lease://acme/r", TTLMs: 5000}}}, 400, "invalid_route", "ops/1"},
		{"DoubleStarInside", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "release", "route": "lease://acme//x", "fencing_token": 1}}}, 400, "invalid_route", "ops/1"},
		{"AcquireWithoutTTL", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "acquire", "route": "lease://acme/r/x"}}}, 400, "invalid_request", "acquire needs ttl_ms"},
		{"ReleaseWithTTL", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "release", "route": "lease://acme/r/x", "fencing_token": 1, "ttl_ms": 5000}}}, 400, "invalid_request", "release does not take ttl_ms"},
		{"ExtendWithoutToken", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "extend", "route": "lease://acme/r/x", "ttl_ms": 5000}}}, 400, "invalid_request", "extend needs fencing_token"},
		{"UnknownOp", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "steal", "route": "lease://acme/r/x"}}}, 400, "invalid_request", ""},
		{"WaitNotTaken", map[string]any{"session_id": a, "ops": []any{map[string]any{"op": "acquire", "route": "lease://acme/r/x", "ttl_ms": 5000, "wait_ms": 10}}}, 400, "invalid_request", "wait_ms"},
		// A TTL out of LeaseTTL's range is a malformed member like any
		// other: the whole batch is refused (client-operations.md#batches).
		{"TTLTooLong", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "acquire", "route": "lease://acme/r/x", "ttl_ms": 600001}}}, 400, "invalid_request", "/ops/1/ttl_ms"},
		{"TTLTooShort", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "acquire", "route": "lease://acme/r/x", "ttl_ms": 99}}}, 400, "invalid_request", "/ops/1/ttl_ms"},
		{"ExtendTTLTooLong", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "extend", "route": "lease://acme/r/x", "fencing_token": 1, "ttl_ms": 3600000}}}, 400, "invalid_request", "/ops/1/ttl_ms"},
		{"TokenBelowOne", map[string]any{"session_id": a, "ops": []any{good, map[string]any{"op": "release", "route": "lease://acme/r/x", "fencing_token": 0}}}, 400, "invalid_request", "/ops/1/fencing_token"},
		{"NoSession", map[string]any{"session_id": strings.Repeat("0", 32), "ops": []any{good}}, 404, "session_not_found", ""},
		{"BadSession", map[string]any{"session_id": "nope", "ops": []any{good}}, 400, "invalid_request", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(b.Events())
			resp := b.Do(t, Request{Method: "POST", Path: "/v1/leases/batch", Body: c.body})
			code, detail := resp.Problem(t)
			if resp.Status != c.status || code != c.code || !strings.Contains(detail, c.detail) {
				t.Fatalf("%d %s %q, want %d %s containing %q", resp.Status, code, detail, c.status, c.code, c.detail)
			}
			if st := b.query(t, good.Route); st.Held || len(b.Events()) != before {
				t.Fatal("a refused batch left state behind")
			}
		})
	}
	t.Run("TooLarge", func(t *testing.T) {
		pad := fmt.Sprintf(`{"session_id":%q,"ops":[{"op":"acquire","route":"lease://acme/r/x","ttl_ms":5000}]%s}`, a, strings.Repeat(" ", 256<<10))
		resp := b.Do(t, Request{Method: "POST", Path: "/v1/leases/batch", Body: pad})
		if code, _ := resp.Problem(t); resp.Status != 413 || code != "payload_too_large" {
			t.Fatalf("%d %s", resp.Status, code)
		}
	})
}

// The documented maximum: 256 operations of the longest routes fit in one
// request and are answered in order.
func TestBatchMaximum(t *testing.T) {
	b := MustStartBroker(t)
	a := createSession(t, b, "", "worker-a", 600000)
	seg := strings.Repeat("s", 120)
	ops := make([]batchOp, 256)
	for i := range ops {
		ops[i] = batchOp{Op: "acquire", Route: fmt.Sprintf("lease://%s/%s/%s%08d", seg, seg, seg, i), TTLMs: 600000}
	}
	out := b.mustBatch(t, "", a, ops)
	for i, r := range out.Results {
		if !r.OK || r.Route != ops[i].Route || r.Lease.Outcome != "acquired" {
			t.Fatalf("result %d = %+v", i, r)
		}
		ops[i] = batchOp{Op: "extend", Route: ops[i].Route, FencingToken: r.Lease.FencingToken, TTLMs: 600000}
	}
	out = b.mustBatch(t, "", a, ops)
	for i, r := range out.Results {
		if !r.OK || r.Lease.Renewals != 1 {
			t.Fatalf("extend %d = %+v", i, r)
		}
		ops[i] = batchOp{Op: "release", Route: ops[i].Route, FencingToken: ops[i].FencingToken}
	}
	b.mustBatch(t, "", a, ops)
	if n := b.metric(t, "muster_leases_active"); n != 0 {
		t.Fatalf("%v leases held after releasing all", n)
	}
	if n := b.metric(t, "muster_lease_releases_total"); n != 256 {
		t.Fatalf("%v releases counted, want 256", n)
	}
}
