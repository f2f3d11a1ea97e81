package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
)

// gapPage fetches one page of a gap.
func (b *Broker) gapPage(tb testing.TB, token, root, live string, limit int, cursor string) (*Response, gapBody, string) {
	tb.Helper()
	q := url.Values{"live": {live}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	resp := b.Do(tb, Request{Method: "GET", Path: fleetPath(root, "/gap?"+q.Encode()), Token: token})
	var g struct {
		gapBody
		NextCursor *string `json:"next_cursor"`
	}
	if resp.Status == 200 {
		resp.JSON(tb, &g)
	}
	next := ""
	if g.NextCursor != nil {
		next = *g.NextCursor
	}
	return resp, g.gapBody, next
}

// A gap is answered in pages of at most limit names a side; the pages,
// concatenated, are the one-page answer, read from one snapshot, and a
// change of the inventory between pages does not show.
func TestFleetGapPaged(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store, writerTok, readerTok)
		w, r := writerTok.Secret, readerTok.Secret
		const root = "paged"
		for range 40 { // m-1 … m-40
			b.mustRegister(t, w, root, "m", `{}`)
		}
		s := createSession(t, b, w, "host", 600000)
		for i := 20; i <= 70; i += 2 { // live: every other of m-20 … m-70
			b.hold(t, w, s, fmt.Sprintf("lease://acme/paged/m-%d", i))
		}
		b.hold(t, w, s, "lease://acme/other/m-1") // another area: only the wide selector sees it
		b.hold(t, w, s, "lease://acme/other/zz")
		for _, live := range []string{"lease://acme/paged/*", "lease://acme/**"} {
			_, whole, next := b.gapPage(t, r, root, live, 10000, "")
			if next != "" {
				t.Fatalf("%s: a one-page gap has a next_cursor", live)
			}
			for _, limit := range []int{1, 3, 7, 25} {
				var missing, orphans []string
				cursor, pages := "", 0
				for {
					resp, g, next := b.gapPage(t, r, root, live, limit, cursor)
					if resp.Status != 200 {
						t.Fatalf("%s limit %d page %d: %d %s", live, limit, pages, resp.Status, resp.Body)
					}
					if len(g.Missing) > limit || len(g.Orphans) > limit {
						t.Fatalf("limit %d: a page of %d missing and %d orphans", limit, len(g.Missing), len(g.Orphans))
					}
					if g.Revision != whole.Revision {
						t.Fatalf("page %d at revision %d, the first at %d", pages, g.Revision, whole.Revision)
					}
					missing, orphans = append(missing, g.Missing...), append(orphans, g.Orphans...)
					pages++
					if pages == 1 {
						// A change between pages is not seen: one snapshot.
						b.hold(t, w, s, fmt.Sprintf("lease://acme/paged/m-%d", 1+pages))
					}
					if next == "" {
						break
					}
					cursor = next
				}
				if !slices.Equal(missing, whole.Missing) || !slices.Equal(orphans, whole.Orphans) {
					t.Fatalf("%s limit %d (%d pages):\nmissing %v\n   want %v\norphans %v\n   want %v", live, limit, pages, missing, whole.Missing, orphans, whole.Orphans)
				}
				_, whole, _ = b.gapPage(t, r, root, live, 10000, "") // the inventory changed
			}
		}
		// A cursor is bound to its root and selector.
		_, _, next := b.gapPage(t, r, root, "lease://acme/paged/*", 2, "")
		resp, _, _ := b.gapPage(t, r, root, "lease://acme/**", 2, next)
		wantProblem(t, resp, 400, "invalid_cursor")
		resp, _, _ = b.gapPage(t, r, "monitors", "lease://acme/paged/*", 2, next)
		wantProblem(t, resp, 400, "invalid_cursor")
		resp, _, _ = b.gapPage(t, r, root, "lease://acme/paged/*", 10001, "")
		wantProblem(t, resp, 400, "invalid_request")
	})
}
