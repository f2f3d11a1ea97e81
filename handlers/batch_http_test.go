package handlers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// The hand encoder writes what the strict handler's encoding/json writes
// for the same results (the same members, names and values; escaping may
// differ).
func TestAppendBatchAnswerMatchesEncodingJSON(t *testing.T) {
	s := core.NewState(core.Config{Epoch: "e", IncarnationKey: []byte("k")})
	now := time.Date(2026, 12, 1, 3, 4, 5, 123456789, time.UTC)
	id := core.SessionID{1}
	if _, err := s.CreateSession(now, core.SessionRequest{Family: "f", ID: id, OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	in := []wireOp{
		{Op: api.Acquire, Route: "lease://a/b/c", TTL: 1000, HasTTL: true},
		{Op: api.Acquire, Route: `lease://é/"q"/<\>`, TTL: 1000, HasTTL: true},
		{Op: api.Acquire, Route: "lease://a/b/c", TTL: 1000, HasTTL: true},
		{Op: api.Extend, Route: "lease://a/b/c", TTL: 5000, HasTTL: true, Token: 1, HasToken: true},
		{Op: api.Extend, Route: "lease://a/b/c", TTL: 5000, HasTTL: true, Token: 9, HasToken: true},
		{Op: api.Release, Route: "lease://a/b/c", Token: 1, HasToken: true},
		{Op: api.Release, Route: "lease://a/b/d", Token: 1, HasToken: true},
	}
	ops, err := batchOps(in, core.AllGrants())
	if err != nil {
		t.Fatal(err)
	}
	ops[6].Refused = errForbidden
	ans, err := s.Batch(now, core.BatchRequest{Family: "f", Session: id, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	res := ans.Results
	want := api.BatchResponse{Results: make([]api.BatchResult, len(res)), Revision: int64(s.Revision())}
	for i, r := range res {
		want.Results[i] = batchResult(&in[i], ops[i].Route, r)
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got := appendBatchAnswer(nil, in, res, ans.Revision)
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %s", got)
	}
	json.Unmarshal(wantJSON, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("hand encoder:\n%s\nencoding/json:\n%s", got, wantJSON)
	}
	for _, member := range []string{`"outcome":"acquired"`, `"outcome":"already_held"`, `"code":"fenced"`, `"code":"forbidden"`, `"renewals":1`} {
		if !json.Valid(got) || !contains(got, member) {
			t.Errorf("the answer lacks %s: %s", member, got)
		}
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
