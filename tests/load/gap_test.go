package load

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/core"
)

// BenchmarkHTTPGap times GET /v1/fleets/{root}/gap over loopback HTTP with
// 10,000 desired specs against 10,000 held leases matching the live
// selector, half of them overlapping (5,000 missing, 5,000 orphans): one
// inventory clone and walk, the whole desired set read from the store, the
// plan and the JSON. Target: ≤ 100 ms per call. The postgres case runs when
// MUSTER_TEST_PG_URL is set (tests/pg/start.sh).
func BenchmarkHTTPGap(b *testing.B) {
	stores := []struct{ name, url string }{{"bolt", ""}}
	if u := os.Getenv("MUSTER_TEST_PG_URL"); u != "" && os.Getenv("MUSTER_TEST_PG") != "off" {
		stores = append(stores, struct{ name, url string }{"postgres", u})
	} else {
		b.Log("MUSTER_TEST_PG_URL is not set: the postgres case is not run")
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			storeURL := st.url
			if storeURL != "" {
				storeURL = pgSchema(b, storeURL)
			}
			m := startBroker(b, tokenConfig, storeURL)
			const n = 10_000
			fillDesired(b, m, "monitors", n)
			holdRange(b, m.Broker(), "monitors", n/2+1, n/2+n)
			c := Client(1)
			target := m.URL() + "/v1/fleets/monitors/gap?" + url.Values{"live": {"lease://load/monitors/*"}}.Encode()
			for b.Loop() {
				req, _ := http.NewRequest("GET", target, nil)
				req.Header.Set("Authorization", "Bearer load-token")
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var g struct{ Missing, Orphans []string }
				err = json.NewDecoder(resp.Body).Decode(&g)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || len(g.Missing) != n/2 || len(g.Orphans) != n/2 {
					b.Fatalf("gap: %d %v missing %d orphans %d", resp.StatusCode, err, len(g.Missing), len(g.Orphans))
				}
			}
		})
	}
}

// fillDesired registers repo-1 … repo-n under root in family "load", through
// the store directly (an HTTP round trip each would only slow the set-up).
func fillDesired(b *testing.B, m *app.Main, root string, n int) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		next = make(chan struct{}, n)
		errs = make(chan error, 8)
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				if _, err := m.Fleet().Register(context.Background(), "load", root, "repo", []byte(`{"topic":"releases","schedule":"@hourly"}`)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// holdRange holds lease://load/<area>/repo-<i> for i in [from, to] in one
// actor step.
func holdRange(b *testing.B, br *core.Broker, area string, from, to int) {
	b.Helper()
	err := br.Exec(context.Background(), func(s *core.State, now time.Time) error {
		var id core.SessionID
		id[0] = 2
		if _, err := s.CreateSession(now, id, "load", "gap-holder", core.MaxSessionTTL); err != nil {
			return err
		}
		for i := from; i <= to; i++ {
			r := core.Route{Realm: "load", Area: area, Resource: "repo-" + strconv.Itoa(i)}
			if _, _, err := s.Acquire(now, "load", id, r, core.MaxLeaseTTL, 0); err != nil {
				return err
			}
		}
		s.TakeEvents()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// pgSchema creates an empty schema on the server at base and returns a URL
// whose connections use it alone; it is dropped when the benchmark ends.
func pgSchema(b *testing.B, base string) string {
	b.Helper()
	ctx := context.Background()
	exec := func(sql string) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close(ctx) }()
		_, err = c.Exec(ctx, sql)
		return err
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	schema := "load_" + hex.EncodeToString(rnd)
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
