package e2e

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type itemBody struct {
	Route             string    `json:"route"`
	OwnerID           string    `json:"owner_id"`
	HolderIncarnation string    `json:"holder_incarnation"`
	AcquiredAt        time.Time `json:"acquired_at"`
	ExpiresAt         time.Time `json:"expires_at"`
	RemainingMs       int64     `json:"remaining_ms"`
	Renewals          int64     `json:"renewals"`
}

type pageBody struct {
	Items      []itemBody `json:"items"`
	NextCursor *string    `json:"next_cursor"`
	Snapshot   struct {
		Epoch    string `json:"epoch"`
		Revision int64  `json:"revision"`
	} `json:"snapshot"`
}

func listPath(selector string, limit int, cursor string) string {
	q := url.Values{"selector": {selector}}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return "/v1/leases?" + q.Encode()
}

func (b *Broker) list(tb testing.TB, token, selector string, limit int, cursor string) (*Response, pageBody) {
	tb.Helper()
	resp := b.Do(tb, Request{Method: "GET", Path: listPath(selector, limit, cursor), Token: token})
	var p pageBody
	if resp.Status == 200 {
		resp.JSON(tb, &p)
	}
	return resp, p
}

// listAll pages a selector to its end and returns the routes and the
// snapshot revision of the first page.
func (b *Broker) listAll(tb testing.TB, token, selector string, limit int) ([]itemBody, int64) {
	tb.Helper()
	var items []itemBody
	cursor := ""
	var rev int64 = -1
	for pages := 0; ; pages++ {
		resp, p := b.list(tb, token, selector, limit, cursor)
		if resp.Status != 200 {
			tb.Fatalf("list %s: %d %s", selector, resp.Status, resp.Body)
		}
		if rev < 0 {
			rev = p.Snapshot.Revision
		} else if p.Snapshot.Revision != rev {
			tb.Fatalf("a later page reports revision %d, the first %d", p.Snapshot.Revision, rev)
		}
		items = append(items, p.Items...)
		if p.NextCursor == nil {
			return items, rev
		}
		cursor = *p.NextCursor
		if pages > 10000 {
			tb.Fatal("paging does not end")
		}
	}
}

func routesOf(items []itemBody) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Route)
	}
	return out
}

func TestListExactAndWildcard(t *testing.T) {
	b := MustStartBroker(t)
	s1 := createSession(t, b, "", "worker-1", 600000)
	s2 := createSession(t, b, "", "worker-1", 600000) // same owner, another session
	for _, r := range []string{"lease://acme/renderers/d1", "lease://acme/renderers/d2", "lease://acme/other/d3", "lease://beta/renderers/d4"} {
		b.mustAcquire(t, s1, r)
	}
	b.mustAcquire(t, s2, "lease://acme/renderers/d5")
	// A waiter is not a holder.
	w := createSession(t, b, "", "waiter", 600000)
	go b.acquire(t, w, "lease://acme/renderers/d1", 1000, 20000)
	waitFor(t, func() bool { return b.query(t, "lease://acme/renderers/d1").Waiters == 1 })

	// Exact: zero or one item, never a cursor.
	resp, p := b.list(t, "", "lease://acme/renderers/d1", 0, "")
	if resp.Status != 200 || len(p.Items) != 1 || p.NextCursor != nil || p.Items[0].OwnerID != "worker-1" {
		t.Fatalf("exact list: %d %s", resp.Status, resp.Body)
	}
	if _, p = b.list(t, "", "lease://acme/renderers/nope", 0, ""); len(p.Items) != 0 || p.NextCursor != nil {
		t.Fatal("exact list of a free route returned something")
	}

	items, _ := b.listAll(t, "", "lease://acme/renderers/*", 2)
	want := []string{"lease://acme/renderers/d1", "lease://acme/renderers/d2", "lease://acme/renderers/d5"}
	if got := routesOf(items); !slices.Equal(got, want) {
		t.Fatalf("wildcard list = %v, want %v", got, want)
	}
	inc := map[string]string{}
	for _, it := range items {
		if it.OwnerID == "" || it.HolderIncarnation == "" || it.AcquiredAt.IsZero() || it.ExpiresAt.IsZero() || it.RemainingMs != 10000 {
			t.Fatalf("item fields: %+v", it)
		}
		inc[it.Route] = it.HolderIncarnation
	}
	if inc[want[0]] != inc[want[1]] || inc[want[0]] == inc[want[2]] {
		t.Fatalf("incarnations: one session's leases must share one, another session's differ: %v", inc)
	}
	raw := b.Do(t, Request{Method: "GET", Path: listPath("lease://**", 0, "")}).Body
	for _, secret := range []string{s1, s2, w, "fencing"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("LIST exposes %q", secret)
		}
	}
	all, _ := b.listAll(t, "", "lease://*/renderers/*", 1)
	if got := routesOf(all); !slices.Equal(got, []string{"lease://acme/renderers/d1", "lease://acme/renderers/d2", "lease://acme/renderers/d5", "lease://beta/renderers/d4"}) {
		t.Fatalf("wildcard realm list = %v", got)
	}

	// Expired leases are absent, without waiting for a tick.
	b.Clock.Advance(10*time.Second + time.Millisecond)
	if items, _ := b.listAll(t, "", "lease://acme/renderers/*", 100); len(items) != 1 || items[0].OwnerID != "waiter" {
		t.Fatalf("after expiry: %+v", items)
	}
	// Reconnect: a new session gets a new incarnation.
	s3 := createSession(t, b, "", "worker-1", 600000)
	b.mustAcquire(t, s3, "lease://acme/renderers/d9")
	_, p = b.list(t, "", "lease://acme/renderers/d9", 0, "")
	if p.Items[0].HolderIncarnation == inc[want[0]] || p.Items[0].HolderIncarnation == inc[want[2]] {
		t.Fatal("a new session reused an incarnation")
	}
}

func TestListFamilyIsolation(t *testing.T) {
	b := MustStartBroker(t, writerTok, otherTok)
	a := createSession(t, b, writerTok.Secret, "a", 60000)
	o := createSession(t, b, otherTok.Secret, "o", 60000)
	b.Do(t, Request{Method: "POST", Path: "/v1/leases/acme/r/x/acquire", Token: writerTok.Secret, Body: map[string]any{"session_id": a, "ttl_ms": 10000}})
	b.Do(t, Request{Method: "POST", Path: "/v1/leases/acme/r/y/acquire", Token: otherTok.Secret, Body: map[string]any{"session_id": o, "ttl_ms": 10000}})
	items, _ := b.listAll(t, writerTok.Secret, "lease://acme/**", 10)
	if got := routesOf(items); !slices.Equal(got, []string{"lease://acme/r/x"}) {
		t.Fatalf("acme sees %v", got)
	}
	items, _ = b.listAll(t, otherTok.Secret, "lease://**", 10)
	if got := routesOf(items); !slices.Equal(got, []string{"lease://acme/r/y"}) {
		t.Fatalf("other sees %v", got)
	}
}

// A restarted broker is a new, empty universe: new epoch, no leases, new
// incarnations; and a cursor of the old lifetime answers epoch_changed.
func TestListAcrossRestart(t *testing.T) {
	b := MustStartBroker(t)
	s := createSession(t, b, "", "w", 60000)
	for i := 0; i < 5; i++ {
		b.mustAcquire(t, s, fmt.Sprintf("lease://acme/r/%d", i))
	}
	_, p := b.list(t, "", "lease://acme/r/*", 2, "")
	oldInc := p.Items[0].HolderIncarnation
	b2 := MustRestartBroker(t, b)
	if b2.Epoch() == b.Epoch() {
		t.Fatal("restart kept the epoch")
	}
	resp, _ := b2.list(t, "", "lease://acme/r/*", 2, *p.NextCursor)
	wantProblem(t, resp, 410, "epoch_changed")
	if items, _ := b2.listAll(t, "", "lease://**", 100); len(items) != 0 {
		t.Fatalf("a restarted broker lists %d leases", len(items))
	}
	s2 := createSession(t, b2, "", "w", 60000)
	b2.mustAcquire(t, s2, "lease://acme/r/0")
	if _, p2 := b2.list(t, "", "lease://acme/r/0", 0, ""); p2.Items[0].HolderIncarnation == oldInc {
		t.Fatal("an incarnation survived the restart")
	}
}

func TestCursorMisuse(t *testing.T) {
	b := MustStartBroker(t, writerTok, TokenSpec{Secret: "acme-2", Family: "acme2", Grants: []string{"lease://**#*"}})
	s := createSession(t, b, writerTok.Secret, "w", 600000)
	for i := 0; i < 6; i++ {
		b.Do(t, Request{Method: "POST", Path: fmt.Sprintf("/v1/leases/acme/r/%d/acquire", i), Token: writerTok.Secret, Body: map[string]any{"session_id": s, "ttl_ms": 600000}})
	}
	const sel = "lease://acme/r/*"
	_, first := b.list(t, writerTok.Secret, sel, 2, "")
	cursor := *first.NextCursor
	raw, _ := base64.RawURLEncoding.DecodeString(cursor)
	flipped := append([]byte{}, raw...)
	flipped[len(flipped)/2] ^= 0x40
	cases := []struct {
		name, token, selector, cursor string
		status                        int
		code                          string
	}{
		{"FlippedByte", writerTok.Secret, sel, base64.RawURLEncoding.EncodeToString(flipped), 400, "invalid_cursor"},
		{"Truncated", writerTok.Secret, sel, cursor[:len(cursor)-4], 400, "invalid_cursor"},
		{"Garbage", writerTok.Secret, sel, "not-a-cursor", 400, "invalid_cursor"},
		{"AnotherSelector", writerTok.Secret, "lease://acme/**", cursor, 400, "invalid_cursor"},
		{"AnotherFamily", "acme-2", sel, cursor, 400, "invalid_cursor"},
		{"ExactSelector", writerTok.Secret, "lease://acme/r/1", cursor, 400, "invalid_cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := b.list(t, tc.token, tc.selector, 2, tc.cursor)
			wantProblem(t, resp, tc.status, tc.code)
			// The rightful caller's cursor still works after the misuse.
			resp, p := b.list(t, writerTok.Secret, sel, 2, cursor)
			if resp.Status != 200 || len(p.Items) != 2 || p.Items[0].Route != "lease://acme/r/2" {
				t.Fatalf("rightful cursor after misuse: %d %s", resp.Status, resp.Body)
			}
		})
	}
	t.Run("IdleTimeout", func(t *testing.T) {
		_, p := b.list(t, writerTok.Secret, sel, 2, "")
		b.Clock.Advance(120*time.Second + time.Millisecond)
		resp, _ := b.list(t, writerTok.Secret, sel, 2, *p.NextCursor)
		wantProblem(t, resp, 410, "cursor_expired")
	})
	t.Run("Eviction", func(t *testing.T) {
		_, p := b.list(t, writerTok.Secret, sel, 2, "")
		for i := 0; i < 64; i++ { // the per-caller cap is 64: the oldest goes
			b.list(t, writerTok.Secret, sel, 2, "")
		}
		resp, _ := b.list(t, writerTok.Secret, sel, 2, *p.NextCursor)
		wantProblem(t, resp, 410, "cursor_expired")
		if b.metric(t, "muster_list_snapshots_dropped_total", `reason="evicted"`) < 1 {
			t.Fatal("eviction not counted")
		}
	})
}

// An empty cursor is one rule on every paged operation: it is a cursor the
// broker did not issue (400 invalid_cursor), never "the first page". A
// client that turned a missing next_cursor into `cursor=` would otherwise
// start over silently and loop; a listing starts by leaving cursor out.
func TestEmptyCursorIsRefusedEverywhere(t *testing.T) {
	b := MustStartBroker(t)
	sess := createSession(t, b, "", "w", 600000)
	b.mustAcquire(t, sess, "lease://acme/monitors/repo-1")
	b.mustRegister(t, "", "monitors", "repo", `{}`)
	for _, tc := range []struct{ path, first string }{
		{"/v1/leases?selector=lease://acme/*/*&cursor=", "/v1/leases?selector=lease://acme/*/*"},
		{"/v1/leases?cursor=&selector=lease://acme/*/*", "/v1/leases?selector=lease://acme/*/*"},
		{"/v1/leases?selector=lease://acme/*/*&cursor", "/v1/leases?selector=lease://acme/*/*"},
		{"/v1/leases?selector=lease://acme/monitors/repo-1&cursor=", "/v1/leases?selector=lease://acme/monitors/repo-1"},
		{"/v1/fleets/monitors/specs?cursor=", "/v1/fleets/monitors/specs"},
		{"/v1/fleets/monitors/specs?limit=1&cursor", "/v1/fleets/monitors/specs?limit=1"},
		{"/v1/fleets/monitors/gap?live=lease://acme/monitors/*&cursor=", "/v1/fleets/monitors/gap?live=lease://acme/monitors/*"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			wantProblem(t, b.Do(t, Request{Method: "GET", Path: tc.path}), 400, "invalid_cursor")
			// Without the parameter, the first page.
			if resp := b.Do(t, Request{Method: "GET", Path: tc.first}); resp.Status != 200 {
				t.Fatalf("GET %s: %d %s", tc.first, resp.Status, resp.Body)
			}
		})
	}
}
