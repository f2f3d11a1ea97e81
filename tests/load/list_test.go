package load

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
)

// fill holds realms×10×100 leases in family "load" through the actor.
func fill(b *testing.B, br *core.Broker, realms int) {
	b.Helper()
	err := br.Exec(context.Background(), func(s *core.State, now time.Time) error {
		var id core.SessionID
		id[0] = 1
		if _, err := s.CreateSession(now, id, "load", "filler", core.MaxSessionTTL); err != nil {
			return err
		}
		for i := 0; i < realms; i++ {
			for j := 0; j < 10; j++ {
				for k := 0; k < 100; k++ {
					r := core.Route{Realm: "realm-" + strconv.Itoa(i), Area: "area-" + strconv.Itoa(j), Resource: "res-" + strconv.Itoa(k)}
					if _, _, err := s.Acquire(now, "load", id, r, core.MaxLeaseTTL, 0); err != nil {
						return err
					}
				}
			}
			s.TakeEvents()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
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
