package handlers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

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

// appendString writes what jsontext.AppendQuote writes, for every ASCII
// character alone and among others, and for text outside ASCII.
func TestAppendStringIsAppendQuote(t *testing.T) {
	var cases []string
	for c := range 128 {
		cases = append(cases, string(rune(c)), "lease://a/b"+string(rune(c))+"c")
	}
	cases = append(cases, "", "lease://é/b/c", "\u2028", `<&>`, "lease://peers/w1/b2")
	for _, s := range cases {
		want, err := jsontext.AppendQuote(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// timeTexts writes each time as appendTime does, repeated or not.
func TestTimeTextsIsAppendTime(t *testing.T) {
	var c timeTexts
	base := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	for _, d := range []time.Duration{0, 0, time.Minute, 0, time.Minute, 7, time.Minute + 120, 7, 0, 123456789} {
		tm := base.Add(d)
		want, _ := appendTime([]byte("x"), tm, true)
		if got := c.append([]byte("x"), tm); string(got) != string(want) {
			t.Errorf("%v: %s, want %s", tm, got, want)
		}
	}
}

// Batches served at once, of different sizes and routes, each get their
// own answer: the recycled bodies, operations, results and buffers of one
// request (batchBodies, wireOpBufs, batchScratch, batchBufs) never show in
// another's, and no held lease keeps a recycled body's bytes as its key
// (the inventory lists every route granted, short keys and long).
func TestConcurrentBatchesKeepTheirOwnAnswers(t *testing.T) {
	s := benchServer(t)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	want := map[string]bool{}
	route := func(w, round, i int) string {
		if i%2 == 1 { // past the 24 bytes a grant keeps in its own allocation
			return fmt.Sprintf("lease://c/w%d/a-longer-resource-name-r%d-%d", w, round, i)
		}
		return fmt.Sprintf("lease://c/w%d/r%d-%d", w, round, i)
	}
	for w := range workers {
		session := newSession(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 40 {
				n := 1 + (w*7+round*13)%96
				var ops []string
				for i := range n {
					ops = append(ops, fmt.Sprintf(`{"op":"acquire","route":%q,"ttl_ms":60000}`, route(w, round, i)))
				}
				body := fmt.Sprintf(`{"session_id":%q,"ops":[%s]}`, session, strings.Join(ops, ","))
				rec := serve(s, "POST", "/v1/leases/batch", body)
				var out struct {
					Results []struct {
						Ok    bool   `json:"ok"`
						Route string `json:"route"`
					} `json:"results"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 || len(out.Results) != n {
					errs <- fmt.Errorf("worker %d round %d: %d %s", w, round, rec.Code, rec.Body)
					return
				}
				for i, r := range out.Results {
					if want := route(w, round, i); !r.Ok || r.Route != want {
						errs <- fmt.Errorf("worker %d round %d result %d: %+v, want %s", w, round, i, r, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range workers {
		for round := range 40 {
			for i := range 1 + (w*7+round*13)%96 {
				want[route(w, round, i)] = true
			}
		}
	}
	cursor := ""
	for {
		rec := serve(s, "GET", "/v1/leases?selector=lease://c/**&limit=500"+cursor, "")
		var page struct {
			Items []struct {
				Route string `json:"route"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != 200 {
			t.Fatalf("list: %d %s", rec.Code, rec.Body)
		}
		for _, it := range page.Items {
			if !want[it.Route] {
				t.Fatalf("the inventory lists %q, granted never or twice", it.Route)
			}
			delete(want, it.Route)
		}
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	if len(want) != 0 {
		t.Fatalf("%d routes granted are not listed", len(want))
	}
}
