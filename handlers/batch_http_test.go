package handlers

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/musterhq/muster/api"
)

// The hand encoder writes what encoding/json writes for the same answer
// (the same members, names and values; escaping may differ).
func TestAppendBatchResponseMatchesEncodingJSON(t *testing.T) {
	code, status, detail := api.ErrorCode("lease_held"), 409, `held by "another" <session> & more ✓`
	acquired := api.LeaseOutcomeAcquired
	at := time.Date(2026, 12, 1, 3, 4, 5, 123456789, time.UTC)
	out := api.BatchResponse{Revision: 1 << 40, Results: []api.BatchResult{
		{Op: api.Acquire, Route: "lease://a/b/c", Ok: true, Lease: &api.Lease{Route: "lease://a/b/c", FencingToken: 7, AcquiredAt: at, ExpiresAt: at.Add(time.Second), Outcome: &acquired}},
		{Op: api.Extend, Route: `lease://é/"q"/<\>`, Ok: true, Lease: &api.Lease{Route: `lease://é/"q"/<\>`, FencingToken: 1<<62 + 1, AcquiredAt: at.Truncate(time.Second), ExpiresAt: at, Renewals: 3}},
		{Op: api.Release, Route: "lease://a/b/d", Ok: true},
		{Op: api.Acquire, Route: "lease://a/b/e", Ok: false, Code: &code, Status: &status, Detail: &detail},
	}}
	want, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got := appendBatchResponse(nil, &out)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("hand encoder:\n%s\nencoding/json:\n%s", got, want)
	}
}
