package handlers

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// FuzzBatchOps: whatever the decoded operations, batchOps either refuses the
// batch with a typed error (invalid_request or invalid_route) or yields one
// core operation per input whose kind, route and members are exactly those
// the input's kind takes; a route outside the grants is refused alone.
func FuzzBatchOps(f *testing.F) {
	for _, s := range []string{
		`[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]`,
		`[{"op":"extend","route":"lease://a/b/c","ttl_ms":1000,"fencing_token":3},{"op":"release","route":"lease://x/b/c","fencing_token":1}]`,
		`[{"op":"release","route":"lease://a/b/*","fencing_token":1}]`,
		`[{"op":"acquire","route":"lease://a/b/c","fencing_token":1}]`,
		`[{"op":"nap","route":"lease://a//c"}]`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	grants, err := core.ParseGrants([]string{"lease://a/**#write"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in []api.BatchOp
		if json.Unmarshal(data, &in) != nil {
			return
		}
		ops, err := batchOps(wireOps(in), grants)
		if err != nil {
			var e *muster.Error
			if !errors.As(err, &e) || (e.Code != muster.CodeInvalidRequest && e.Code != muster.CodeInvalidRoute) {
				t.Fatalf("refusal %v is not a typed invalid_request/invalid_route", err)
			}
			return
		}
		if len(ops) != len(in) || len(ops) == 0 || len(ops) > core.MaxBatchOps {
			t.Fatalf("%d ops for %d inputs", len(ops), len(in))
		}
		for i, op := range ops {
			r, err := core.ParseRoute(in[i].Route)
			if err != nil || r != op.Route || op.Route.String() != in[i].Route {
				t.Fatalf("op %d: route %q became %+v (%v)", i, in[i].Route, op.Route, err)
			}
			takesTTL := op.Kind == core.BatchAcquire || op.Kind == core.BatchExtend
			takesToken := op.Kind == core.BatchExtend || op.Kind == core.BatchRelease
			if op.Kind.String() != string(in[i].Op) || takesTTL != (in[i].TtlMs != nil) || takesToken != (in[i].FencingToken != nil) {
				t.Fatalf("op %d: %+v accepted as %+v", i, in[i], op)
			}
			if takesToken && op.Token < 1 {
				t.Fatalf("op %d: token %d", i, op.Token)
			}
			if forbidden := op.Route.Realm != "a"; forbidden != (op.Refused != nil) {
				t.Fatalf("op %d: route %s refused=%v", i, op.Route, op.Refused)
			}
		}
	})
}
