package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster"
)

func mustSel(t testing.TB, s string) Selector {
	t.Helper()
	sel, err := ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func subIDs(t *testing.T, s *State, fam Family, key string) []string {
	t.Helper()
	var out []string
	for _, d := range s.Deliveries(&Event{Family: fam, Key: key}, nil) {
		out = append(out, fmt.Sprintf("%d:%s", d.Stream, d.SubscriptionID))
	}
	slices.Sort(out)
	return out
}

func TestWatchMatchingAndOverlap(t *testing.T) {
	s := newLeaseFixture(t, 1).s
	id := sid(1)
	ws, err := s.Subscribe(t0, 1, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://acme/renderers/*"), mustSel(t, "lease://acme/**"), mustSel(t, "lease://acme/renderers/doc-1")}, Caller: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Subscriptions) != 3 {
		t.Fatalf("subscriptions = %+v", ws.Subscriptions)
	}
	got := subIDs(t, s, "acme", "acme/renderers/doc-1")
	if want := []string{"1:sub-1", "1:sub-2", "1:sub-3"}; !slices.Equal(got, want) {
		t.Fatalf("overlapping selectors: %v, want %v", got, want)
	}
	if got := subIDs(t, s, "acme", "acme/other/x"); !slices.Equal(got, []string{"1:sub-2"}) {
		t.Fatalf("acme/other/x: %v", got)
	}
	if got := subIDs(t, s, "beta", "acme/renderers/doc-1"); len(got) != 0 {
		t.Fatalf("another family matched: %v", got)
	}
}

func TestWatchLimits(t *testing.T) {
	s := newLeaseFixture(t, 1).s
	id := sid(1)
	for i := 0; i < MaxWildcardRegistrations; i++ {
		if _, err := s.Subscribe(t0, StreamID(i+1), SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, fmt.Sprintf("lease://r%d/*/*", i))}, Caller: "c"}); err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	_, err := s.Subscribe(t0, 999, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://one-more/*/*")}, Caller: "c"})
	wantCode(t, err, muster.CodeSubscriptionLimit)
	if s.streams[999] != nil {
		t.Fatal("a refused open left a stream behind")
	}
	// A duplicate is checked first: it supersedes instead of counting.
	if _, err := s.Subscribe(t0, 1000, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://r0/*/*")}, Caller: "c"}); err != nil {
		t.Fatalf("duplicate at the cap: %v", err)
	}
	// Exact registrations are exempt from the wildcard cap.
	if _, err := s.Subscribe(t0, 1001, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://a/b/c")}, Caller: "c"}); err != nil {
		t.Fatalf("exact at the wildcard cap: %v", err)
	}
	// All or nothing: one bad selector among good ones registers nothing.
	before := s.Stats()
	_, err = s.Subscribe(t0, 1002, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://x/y/z"), mustSel(t, "lease://new/*/*")}, Caller: "c"})
	wantCode(t, err, muster.CodeSubscriptionLimit)
	if after := s.Stats(); after.ExactRegistrations != before.ExactRegistrations {
		t.Fatal("a refused open registered part of its selectors")
	}
}

func TestWatchSupersedeUnsubscribeSessionEnd(t *testing.T) {
	s := newLeaseFixture(t, 1).s
	id := sid(1)
	a := mustSel(t, "lease://acme/a/*")
	b := mustSel(t, "lease://acme/b/*")
	first, _ := s.Subscribe(t0, 1, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{a, b}, Caller: "c"})
	second, _ := s.Subscribe(t0, 2, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{a}, Caller: "c"})
	if first.Subscriptions[0].ID != second.Subscriptions[0].ID {
		t.Fatal("a duplicate open did not keep the subscription id")
	}
	if ends := s.TakeStreamEnds(); len(ends) != 1 || ends[0] != (StreamEnd{1, EndSuperseded}) {
		t.Fatalf("ends = %+v", ends)
	}
	if got := subIDs(t, s, "acme", "acme/a/x"); !slices.Equal(got, []string{"2:" + second.Subscriptions[0].ID}) {
		t.Fatalf("after supersede: %v", got)
	}
	if got := subIDs(t, s, "acme", "acme/b/x"); len(got) != 0 {
		t.Fatalf("the superseded stream's other registration survived: %v", got)
	}
	s.Subscribe(t0, 3, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{b}, Caller: "c"})
	if err := s.Unsubscribe(t0, "acme", id, a); err != nil {
		t.Fatal(err)
	}
	if ends := s.TakeStreamEnds(); len(ends) != 1 || ends[0] != (StreamEnd{2, EndUnsubscribed}) {
		t.Fatalf("ends after unsubscribe = %+v", ends)
	}
	if got := subIDs(t, s, "acme", "acme/b/x"); len(got) != 1 {
		t.Fatalf("unsubscribe removed more than its registration: %v", got)
	}
	if err := s.Unsubscribe(t0, "acme", id, a); err != nil {
		t.Fatalf("unsubscribing twice: %v", err)
	}
	s.EndSession(t0, "acme", id)
	if ends := s.TakeStreamEnds(); len(ends) != 1 || ends[0] != (StreamEnd{3, EndSessionClosed}) {
		t.Fatalf("ends after session end = %+v", ends)
	}
	if st := s.Stats(); st.ExactRegistrations != 0 || st.WildcardRegistrations != 0 || st.Streams != 0 {
		t.Fatalf("registrations left after session end: %+v", st)
	}
}

func TestWatchReadOnlySession(t *testing.T) {
	s := newLeaseFixture(t).s
	anon := sid(77)
	if _, err := s.Subscribe(t0, 5, SubscribeRequest{Family: "acme", Anon: anon, Selectors: []Selector{mustSel(t, "lease://**")}, Caller: "c"}); err != nil {
		t.Fatal(err)
	}
	if got := subIDs(t, s, "acme", "x/y/z"); len(got) != 1 {
		t.Fatalf("read-only stream not matched: %v", got)
	}
	s.DropStream(5)
	if _, ok := s.sessions[anon]; ok {
		t.Fatal("the stream's read-only session outlived it")
	}
	if st := s.Stats(); st.WildcardRegistrations != 0 || st.Streams != 0 {
		t.Fatalf("after drop: %+v", st)
	}
}

func TestWatchMarkerIsSnapshotAtRevision(t *testing.T) {
	f := newLeaseFixture(t, 1)
	f.mustAcquire(1, rA)
	f.mustAcquire(1, rB)
	id := sid(1)
	ws, _ := f.s.Subscribe(f.now, 1, SubscribeRequest{Family: "acme", Session: &id, Selectors: []Selector{mustSel(t, "lease://acme/renderers/*")}, Caller: "c"})
	if ws.Revision != f.s.Revision() || len(ws.Subscriptions[0].Page.Items) != 2 || !ws.Subscriptions[0].Page.Done {
		t.Fatalf("marker = rev %d, %+v", ws.Revision, ws.Subscriptions[0].Page)
	}
}

// The trie agrees with a brute-force matcher over random selectors and
// routes, and reports each matching registration exactly once.
func TestWatchIndexMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alpha := []string{"a", "b", "c"}
	seg := func(wild bool) string {
		if wild {
			switch rng.IntN(5) {
			case 0:
				return "*"
			case 1:
				return "**"
			}
		}
		return alpha[rng.IntN(len(alpha))]
	}
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k")})
	var sels []Selector
	for len(sels) < 300 {
		n := 1 + rng.IntN(4)
		raw := "lease://"
		for i := 0; i < n; i++ {
			if i > 0 {
				raw += "/"
			}
			raw += seg(true)
		}
		sel, err := ParseSelector(raw)
		if err != nil {
			continue
		}
		sels = append(sels, sel)
		s.Subscribe(t0, StreamID(len(sels)), SubscribeRequest{Family: "acme", Anon: sid(byte(len(sels))), Selectors: []Selector{sel}, Caller: "c"})
	}
	for i := 0; i < 200; i++ {
		r := Route{seg(false), seg(false), seg(false)}
		var want []string
		for k, sel := range sels {
			if sel.Matches(r) {
				want = append(want, fmt.Sprintf("%d", k+1))
			}
		}
		var got []string
		for _, d := range s.Deliveries(&Event{Family: "acme", Key: r.Key()}, nil) {
			got = append(got, fmt.Sprintf("%d", d.Stream))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("route %v: index %v, brute force %v", r, got, want)
		}
	}
	_ = time.Second
}

// Read-only stream sessions do not take session slots; streams have their
// own broker-wide cap.
func TestWatchCaps(t *testing.T) {
	s := NewState(Config{Epoch: "e", IncarnationKey: []byte("k"), MaxSessions: 1, MaxStreams: 2})
	sel := mustSel(t, "lease://**")
	for i := 1; i <= 2; i++ {
		if _, err := s.Subscribe(t0, StreamID(i), SubscribeRequest{Family: "acme", Anon: sid(byte(100 + i)), Selectors: []Selector{sel}, Caller: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.Subscribe(t0, 3, SubscribeRequest{Family: "acme", Anon: sid(103), Selectors: []Selector{sel}, Caller: "c"})
	wantCode(t, err, muster.CodeSubscriptionLimit)
	if _, err := s.CreateSession(t0, SessionRequest{Family: "acme", ID: sid(1), OwnerID: "w", TTL: time.Minute}); err != nil {
		t.Fatalf("anonymous streams took the only session slot: %v", err)
	}
	if st := s.Stats(); st.Sessions != 1 || st.Streams != 2 {
		t.Fatalf("stats = %+v", st)
	}
	s.DropStream(1)
	if _, err := s.Subscribe(t0, 4, SubscribeRequest{Family: "acme", Anon: sid(104), Selectors: []Selector{sel}, Caller: "c"}); err != nil {
		t.Fatalf("a freed stream slot: %v", err)
	}
}
