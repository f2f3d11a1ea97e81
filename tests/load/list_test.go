package load

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
)

// hold makes a new session (id byte id) of family "load" hold every route,
// in one actor step.
func hold(b *testing.B, br *core.Broker, id byte, owner string, routes iter.Seq[core.Route]) {
	b.Helper()
	err := br.Exec(context.Background(), func(s *core.State, now time.Time) error {
		var sid core.SessionID
		sid[0] = id
		if _, err := s.CreateSession(now, core.SessionRequest{Family: "load", ID: sid, OwnerID: owner, TTL: core.MaxSessionTTL}); err != nil {
			return err
		}
		n := 0
		for r := range routes {
			if _, _, err := s.Acquire(now, core.AcquireRequest{Family: "load", Session: sid, Route: r, TTL: core.MaxLeaseTTL}); err != nil {
				return err
			}
			if n++; n%4096 == 0 {
				s.TakeEvents()
			}
		}
		s.TakeEvents()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// fill holds realms×10×100 leases: realm-i/area-j/res-k.
func fill(b *testing.B, br *core.Broker, realms int) {
	b.Helper()
	hold(b, br, 1, "filler", func(yield func(core.Route) bool) {
		for i := 0; i < realms; i++ {
			for j := 0; j < 10; j++ {
				for k := 0; k < 100; k++ {
					if !yield(core.Route{Realm: "realm-" + strconv.Itoa(i), Area: "area-" + strconv.Itoa(j), Resource: "res-" + strconv.Itoa(k)}) {
						return
					}
				}
			}
		}
	})
}

// BenchmarkHTTPPageAll pages through 1,000,000 held leases with limit=500
// over loopback HTTP, JSON included; reports items/s.
func BenchmarkHTTPPageAll(b *testing.B) {
	m := startBroker(b, tokenConfig)
	fill(b, m.Broker(), 1000)
	c := Client(1)
	items := 0
	for b.Loop() {
		cursor := ""
		for {
			q := url.Values{"selector": {"lease://**"}, "limit": {"500"}}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			req, _ := http.NewRequest("GET", m.URL()+"/v1/leases?"+q.Encode(), nil)
			req.Header.Set("Authorization", "Bearer load-token")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var page struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor *string           `json:"next_cursor"`
			}
			err = json.NewDecoder(resp.Body).Decode(&page)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("page: %d %v", resp.StatusCode, err)
			}
			items += len(page.Items)
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
	}
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}
